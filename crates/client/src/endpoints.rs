//! One method per endpoint: typed request in, typed answer out (see [`crate::types`]).
//!
//! Reads and the keyed writes are retried under the client's [`RetryPolicy`](crate::RetryPolicy);
//! the other writes are sent once. Every method syncs the clock and sends again once on
//! `request_timestamp_out_of_window`.

use crate::types::*;
use crate::{Client, ClientError, Retry};

impl Client {
    /// `system/health`: Checks the server, the credentials and the envelope.
    pub async fn system_health(&self) -> Result<Health, ClientError> {
        self.typed("system/health", &Empty {}, None, Retry::Safe)
            .await
    }

    /// `system/time`: The server clock (see also [`Client::sync_clock`]).
    pub async fn system_time(&self) -> Result<ServerTime, ClientError> {
        self.typed("system/time", &Empty {}, None, Retry::Safe)
            .await
    }

    /// `project/balance`: The project's master balance.
    pub async fn project_balance(&self) -> Result<ProjectBalance, ClientError> {
        self.typed("project/balance", &Empty {}, None, Retry::Safe)
            .await
    }

    /// `project/txs`: The movements of the master balance.
    pub async fn project_txs(&self, request: &ProjectTxs) -> Result<Page<ProjectTx>, ClientError> {
        self.typed("project/txs", request, None, Retry::Safe).await
    }

    /// `project/wallet/trc20`: The project's USDT TRC20 deposit address.
    pub async fn project_wallet_trc20(&self) -> Result<Wallet, ClientError> {
        self.typed("project/wallet/trc20", &Empty {}, None, Retry::Safe)
            .await
    }

    /// `users/create`: Registers a user (not retried).
    pub async fn users_create(&self, request: &UsersCreate) -> Result<User, ClientError> {
        self.typed("users/create", request, None, Retry::Never)
            .await
    }

    /// `users/get`: Reads a user by `external_user_id`.
    pub async fn users_get(&self, request: &UsersGet) -> Result<User, ClientError> {
        self.typed("users/get", request, None, Retry::Safe).await
    }

    /// `users/find`: Searches the project's users.
    pub async fn users_find(&self, request: &UsersFind) -> Result<Page<User>, ClientError> {
        self.typed("users/find", request, None, Retry::Safe).await
    }

    /// `cardholders/create`: Creates a cardholder (and the user if needed), optionally with KYC data (not retried).
    pub async fn cardholders_create(
        &self,
        request: &CardholdersCreate,
    ) -> Result<Cardholder, ClientError> {
        self.typed("cardholders/create", request, None, Retry::Never)
            .await
    }

    /// `cardholders/get`: Reads a cardholder.
    pub async fn cardholders_get(
        &self,
        request: &CardholdersGet,
    ) -> Result<Cardholder, ClientError> {
        self.typed("cardholders/get", request, None, Retry::Safe)
            .await
    }

    /// `cardholders/find`: Searches the project's cardholders.
    pub async fn cardholders_find(
        &self,
        request: &CardholdersFind,
    ) -> Result<Page<Cardholder>, ClientError> {
        self.typed("cardholders/find", request, None, Retry::Safe)
            .await
    }

    /// `cards/products`: The card products of the catalog.
    pub async fn cards_products(&self) -> Result<ProductList, ClientError> {
        self.typed("cards/products", &Empty {}, None, Retry::Safe)
            .await
    }

    /// `cards/create`: Issues a card; follow `order` with [`Client::wait_order`].
    ///
    /// `idempotency_key` is sent as the `Idempotency-Key` header on every attempt, so a
    /// retry after a lost answer never runs the operation twice.
    pub async fn cards_create(
        &self,
        request: &CardsCreate,
        idempotency_key: &str,
    ) -> Result<CreateCardResponse, ClientError> {
        self.typed("cards/create", request, Some(idempotency_key), Retry::Safe)
            .await
    }

    /// `cards/get`: Reads a card of a user.
    pub async fn cards_get(&self, request: &CardRef) -> Result<Card, ClientError> {
        self.typed("cards/get", request, None, Retry::Safe).await
    }

    /// `cards/find`: Searches the project's cards.
    pub async fn cards_find(&self, request: &CardsFind) -> Result<Page<Card>, ClientError> {
        self.typed("cards/find", request, None, Retry::Safe).await
    }

    /// `cards/balance`: A card's balance.
    pub async fn cards_balance(
        &self,
        request: &CardRef,
    ) -> Result<CardBalanceResponse, ClientError> {
        self.typed("cards/balance", request, None, Retry::Safe)
            .await
    }

    /// `cards/details`: A card's plaintext credentials (do not log them).
    pub async fn cards_details(
        &self,
        request: &CardRef,
    ) -> Result<CardDetailsResponse, ClientError> {
        self.typed("cards/details", request, None, Retry::Safe)
            .await
    }

    /// `cards/freeze`: Freezes an active card (not retried).
    pub async fn cards_freeze(
        &self,
        request: &CardsFreeze,
    ) -> Result<CardStatusResponse, ClientError> {
        self.typed("cards/freeze", request, None, Retry::Never)
            .await
    }

    /// `cards/unfreeze`: Unfreezes a frozen card (not retried).
    pub async fn cards_unfreeze(
        &self,
        request: &CardsFreeze,
    ) -> Result<CardStatusResponse, ClientError> {
        self.typed("cards/unfreeze", request, None, Retry::Never)
            .await
    }

    /// `cards/topup`: Moves USDT from the master balance to a card; returns the `card_topup` order.
    ///
    /// `idempotency_key` is sent as the `Idempotency-Key` header on every attempt, so a
    /// retry after a lost answer never runs the operation twice.
    pub async fn cards_topup(
        &self,
        request: &CardsTopup,
        idempotency_key: &str,
    ) -> Result<Order, ClientError> {
        self.typed("cards/topup", request, Some(idempotency_key), Retry::Safe)
            .await
    }

    /// `cards/withdraw`: Moves money from a card to the master balance; returns the `card_withdraw` order.
    ///
    /// `idempotency_key` is sent as the `Idempotency-Key` header on every attempt, so a
    /// retry after a lost answer never runs the operation twice.
    pub async fn cards_withdraw(
        &self,
        request: &CardsWithdraw,
        idempotency_key: &str,
    ) -> Result<Order, ClientError> {
        self.typed(
            "cards/withdraw",
            request,
            Some(idempotency_key),
            Retry::Safe,
        )
        .await
    }

    /// `cards/txs`: A card's transactions, newest change first.
    pub async fn cards_txs(
        &self,
        request: &CardsTxs,
    ) -> Result<Page<CardTransaction>, ClientError> {
        self.typed("cards/txs", request, None, Retry::Safe).await
    }

    /// `cards/close`: Closes a card for good, withdrawing its money.
    ///
    /// `idempotency_key` is sent as the `Idempotency-Key` header on every attempt, so a
    /// retry after a lost answer never runs the operation twice.
    pub async fn cards_close(
        &self,
        request: &CardsClose,
        idempotency_key: &str,
    ) -> Result<CloseCardResponse, ClientError> {
        self.typed("cards/close", request, Some(idempotency_key), Retry::Safe)
            .await
    }

    /// `cards/3ds/confirm`: Confirms or declines an out-of-band 3DS challenge (not retried).
    pub async fn cards_3ds_confirm(
        &self,
        request: &Cards3dsConfirm,
    ) -> Result<ThreeDsConfirmResponse, ClientError> {
        self.typed("cards/3ds/confirm", request, None, Retry::Never)
            .await
    }

    /// `wh/subscribe`: Subscribes a webhook URL (not retried).
    pub async fn wh_subscribe(&self, request: &WhSubscribe) -> Result<Subscription, ClientError> {
        self.typed("wh/subscribe", request, None, Retry::Never)
            .await
    }

    /// `wh/subscriptions`: The project's subscriptions, newest first.
    pub async fn wh_subscriptions(
        &self,
        request: &ListQuery,
    ) -> Result<Page<Subscription>, ClientError> {
        self.typed("wh/subscriptions", request, None, Retry::Safe)
            .await
    }

    /// `wh/deliveries`: The webhook delivery log.
    pub async fn wh_deliveries(
        &self,
        request: &WhDeliveries,
    ) -> Result<Page<Delivery>, ClientError> {
        self.typed("wh/deliveries", request, None, Retry::Safe)
            .await
    }

    /// `wh/redeliver`: Queues deliveries again (not retried).
    pub async fn wh_redeliver(
        &self,
        request: &WhRedeliver,
    ) -> Result<RedeliverResponse, ClientError> {
        self.typed("wh/redeliver", request, None, Retry::Never)
            .await
    }

    /// `simulate/cards/auth`: Sandbox: an authorization from the card network (not retried).
    pub async fn simulate_cards_auth(
        &self,
        request: &SimulateAuth,
    ) -> Result<SimulatedTransaction, ClientError> {
        self.typed("simulate/cards/auth", request, None, Retry::Never)
            .await
    }

    /// `simulate/cards/clear`: Sandbox: a clearing or force post (not retried).
    pub async fn simulate_cards_clear(
        &self,
        request: &SimulateClear,
    ) -> Result<SimulatedTransaction, ClientError> {
        self.typed("simulate/cards/clear", request, None, Retry::Never)
            .await
    }

    /// `simulate/cards/reversal`: Sandbox: a (partial) reversal of a hold (not retried).
    pub async fn simulate_cards_reversal(
        &self,
        request: &SimulateReversal,
    ) -> Result<SimulatedTransaction, ClientError> {
        self.typed("simulate/cards/reversal", request, None, Retry::Never)
            .await
    }

    /// `simulate/cards/refund`: Sandbox: a refund (not retried).
    pub async fn simulate_cards_refund(
        &self,
        request: &SimulateRefund,
    ) -> Result<SimulatedTransaction, ClientError> {
        self.typed("simulate/cards/refund", request, None, Retry::Never)
            .await
    }

    /// `simulate/cards/3ds`: Sandbox: a 3-D Secure challenge of a purchase (not retried).
    pub async fn simulate_cards_3ds(
        &self,
        request: &Simulate3ds,
    ) -> Result<ThreeDsChallenge, ClientError> {
        self.typed("simulate/cards/3ds", request, None, Retry::Never)
            .await
    }

    /// `orders/check`: reads an order (see also [`Client::wait_order`]).
    pub async fn orders_check(&self, order_id: &str) -> Result<Order, ClientError> {
        self.typed(
            "orders/check",
            &serde_json::json!({ "order_id": order_id }),
            None,
            Retry::Safe,
        )
        .await
    }

    /// `wh/unsubscribe`: deactivates a subscription and answers it. Retried like a read:
    /// unsubscribing twice changes nothing.
    pub async fn wh_unsubscribe(&self, id: &str) -> Result<Subscription, ClientError> {
        self.typed(
            "wh/unsubscribe",
            &serde_json::json!({ "id": id }),
            None,
            Retry::Safe,
        )
        .await
    }
}
