//! One method per endpoint: typed request in, typed answer out (see [`crate::types`]).
//!
//! Reads and the keyed writes are retried under the client's [`RetryPolicy`](crate::RetryPolicy);
//! the other writes are sent once. Every method syncs the clock and sends again once on
//! `request_timestamp_out_of_window`.

use crate::types::*;
use crate::{Client, ClientError, Retry};

/// One endpoint of the API: `POST /api/v2/{path}`, its request and its success answer
/// (the types are named in [`ENDPOINTS`]' source and, with the `openapi` feature, in the
/// OpenAPI document).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    /// Under `/api/v2/`, e.g. `cards/create`.
    pub path: &'static str,
    /// One line: what the endpoint does.
    pub summary: &'static str,
    /// Takes a required `Idempotency-Key` header.
    pub idempotency_key: bool,
    /// Exists only in sandbox mode (a `404 not_found` in production).
    pub sandbox_only: bool,
    /// The request type's name (in [`crate::types`]).
    pub request: &'static str,
    /// The success answer's type name (in [`crate::types`]).
    pub response: &'static str,
}

/// The endpoint table: `path: Request => Response` with flags (`key`: takes an
/// `Idempotency-Key`; `sandbox`: sandbox only) and a summary. [`ENDPOINTS`] and, with the
/// `openapi` feature, the schemas of the OpenAPI document come from it.
macro_rules! endpoint_table {
    ($($path:literal: $req:ty => $resp:ty, key = $key:literal, sandbox = $sandbox:literal, $summary:literal;)*) => {
        /// Every endpoint of the API, in the order of the reference (`docs/api.md`).
        pub const ENDPOINTS: &[Endpoint] = &[$(Endpoint {
            path: $path,
            summary: $summary,
            idempotency_key: $key,
            sandbox_only: $sandbox,
            request: stringify!($req),
            response: stringify!($resp),
        }),*];

        /// Each endpoint with its request schema (from `requests`, the serialize
        /// contract) and its answer schema (from `answers`, the deserialize contract).
        #[cfg(feature = "openapi")]
        pub(crate) fn endpoint_schemas(
            requests: &mut schemars::SchemaGenerator,
            answers: &mut schemars::SchemaGenerator,
        ) -> Vec<(Endpoint, schemars::Schema, schemars::Schema)> {
            let mut out = Vec::new();
            let mut i = 0;
            $(
                out.push((
                    ENDPOINTS[i],
                    requests.subschema_for::<$req>(),
                    answers.subschema_for::<$resp>(),
                ));
                i += 1;
            )*
            let _ = i;
            out
        }
    };
}

endpoint_table! {
    "system/health": Empty => Health, key = false, sandbox = false,
        "Checks the server, the credentials and the envelope";
    "system/time": Empty => ServerTime, key = false, sandbox = false,
        "The server clock in microseconds since the epoch";
    "project/balance": Empty => ProjectBalance, key = false, sandbox = false,
        "The project's master balance";
    "project/txs": ProjectTxs => Page<ProjectTx>, key = false, sandbox = false,
        "The movements of the master balance";
    "project/statement": ProjectStatement => ProjectStatementResponse, key = false, sandbox = false,
        "The master balance over one UTC month: opening, closing, totals and movements";
    "project/wallet/trc20": Empty => Wallet, key = false, sandbox = false,
        "The project's USDT TRC20 deposit address";
    "users/create": UsersCreate => User, key = false, sandbox = false,
        "Registers a user";
    "users/get": UsersGet => User, key = false, sandbox = false,
        "Reads a user by external_user_id";
    "users/find": UsersFind => Page<User>, key = false, sandbox = false,
        "Searches the project's users";
    "cardholders/create": CardholdersCreate => Cardholder, key = false, sandbox = false,
        "Creates a cardholder (and the user if needed), optionally with KYC data";
    "cardholders/get": CardholdersGet => Cardholder, key = false, sandbox = false,
        "Reads a cardholder";
    "cardholders/find": CardholdersFind => Page<Cardholder>, key = false, sandbox = false,
        "Searches the project's cardholders";
    "cards/products": Empty => ProductList, key = false, sandbox = false,
        "The card products of the catalog";
    "cards/create": CardsCreate => CreateCardResponse, key = true, sandbox = false,
        "Issues a card; the answer holds its card_issue order";
    "cards/get": CardRef => Card, key = false, sandbox = false,
        "Reads a card of a user";
    "cards/find": CardsFind => Page<Card>, key = false, sandbox = false,
        "Searches the project's cards";
    "cards/balance": CardRef => CardBalanceResponse, key = false, sandbox = false,
        "A card's balance";
    "cards/details": CardRef => CardDetailsResponse, key = false, sandbox = false,
        "A card's plaintext credentials";
    "cards/reveal/create": CardsRevealCreate => RevealSession, key = false, sandbox = false,
        "A single-use page showing a card's details to the cardholder's browser";
    "cards/freeze": CardsFreeze => CardStatusResponse, key = false, sandbox = false,
        "Freezes an active card";
    "cards/unfreeze": CardsFreeze => CardStatusResponse, key = false, sandbox = false,
        "Unfreezes a frozen card";
    "cards/topup": CardsTopup => Order, key = true, sandbox = false,
        "Moves USDT from the master balance to a card; answers the card_topup order";
    "cards/withdraw": CardsWithdraw => Order, key = true, sandbox = false,
        "Moves money from a card to the master balance; answers the card_withdraw order";
    "cards/txs": CardsTxs => Page<CardTransaction>, key = false, sandbox = false,
        "A card's transactions, newest change first";
    "cards/statement": CardsStatement => CardStatement, key = false, sandbox = false,
        "A card's funds over one UTC month: opening, closing, totals and movements";
    "cards/close": CardsClose => CloseCardResponse, key = true, sandbox = false,
        "Closes a card for good, withdrawing its money";
    "cards/3ds/confirm": Cards3dsConfirm => ThreeDsConfirmResponse, key = false, sandbox = false,
        "Confirms or declines an out-of-band 3DS challenge";
    "cards/limits/set": CardsLimitsSet => CardLimits, key = false, sandbox = false,
        "Replaces a card's spending limits";
    "cards/limits/get": CardsLimitsGet => CardLimits, key = false, sandbox = false,
        "A card's spending limits with what each window has counted";
    "rules/create": RulesCreate => Rule, key = false, sandbox = false,
        "Creates an authorization rule";
    "rules/update": RulesUpdate => Rule, key = false, sandbox = false,
        "Changes a rule (a new version)";
    "rules/get": RuleRef => Rule, key = false, sandbox = false,
        "Reads a rule";
    "rules/list": RulesList => Page<Rule>, key = false, sandbox = false,
        "The project's rules, newest first";
    "rules/delete": RuleRef => RuleDeleted, key = false, sandbox = false,
        "Deletes a rule";
    "rules/results": RulesResults => Page<RuleResult>, key = false, sandbox = false,
        "Every match of an active or shadow rule, newest first";
    "disputes/create": DisputesCreate => Dispute, key = true, sandbox = false,
        "Disputes a settled card transaction";
    "disputes/get": DisputeRef => Dispute, key = false, sandbox = false,
        "Reads a dispute with its timeline and evidence";
    "disputes/find": DisputesFind => Page<Dispute>, key = false, sandbox = false,
        "Searches the project's disputes, newest first";
    "disputes/withdraw": DisputeRef => Dispute, key = false, sandbox = false,
        "Withdraws a dispute that is not final";
    "disputes/evidence/add": DisputesEvidenceAdd => Evidence, key = false, sandbox = false,
        "Adds an evidence file (PDF, PNG or JPEG, at most 4 MiB) to an open dispute";
    "disputes/evidence/get": DisputesEvidenceGet => EvidenceFile, key = false, sandbox = false,
        "Reads an evidence file with its content";
    "reports/create": ReportsCreate => ReportCreated, key = false, sandbox = false,
        "Asks for a report (CSV or JSONL) built in the background";
    "reports/get": ReportRef => Report, key = false, sandbox = false,
        "Reads a report, with a download link once it is ready";
    "orders/check": OrdersCheck => Order, key = false, sandbox = false,
        "Reads an order";
    "wh/subscribe": WhSubscribe => Subscription, key = false, sandbox = false,
        "Subscribes a webhook URL";
    "wh/unsubscribe": WhUnsubscribe => Subscription, key = false, sandbox = false,
        "Deactivates a subscription";
    "wh/subscriptions": ListQuery => Page<Subscription>, key = false, sandbox = false,
        "The project's subscriptions, newest first";
    "wh/deliveries": WhDeliveries => Page<Delivery>, key = false, sandbox = false,
        "The webhook delivery log";
    "wh/redeliver": WhRedeliver => RedeliverResponse, key = false, sandbox = false,
        "Queues deliveries again";
    "wh/decision/set": WhDecisionSet => DecisionEndpoint, key = false, sandbox = false,
        "Sets the project's real-time decision webhook";
    "wh/decision/get": Empty => DecisionEndpoint, key = false, sandbox = false,
        "The project's decision webhook, or configured false";
    "wh/decision/delete": Empty => DecisionEndpoint, key = false, sandbox = false,
        "Removes the project's decision webhook";
    "simulate/cards/auth": SimulateAuth => SimulatedTransaction, key = false, sandbox = true,
        "Sandbox: an authorization from the card network";
    "simulate/cards/clear": SimulateClear => SimulatedTransaction, key = false, sandbox = true,
        "Sandbox: a clearing or force post";
    "simulate/cards/reversal": SimulateReversal => SimulatedTransaction, key = false, sandbox = true,
        "Sandbox: a (partial) reversal of a hold";
    "simulate/cards/refund": SimulateRefund => SimulatedTransaction, key = false, sandbox = true,
        "Sandbox: a refund";
    "simulate/cards/3ds": Simulate3ds => ThreeDsChallenge, key = false, sandbox = true,
        "Sandbox: a 3-D Secure challenge of a purchase";
    "simulate/project/deposit": SimulateProjectDeposit => SimulatedDeposit, key = false, sandbox = true,
        "Sandbox: a confirmed USDT TRC20 deposit to the project's address";
    "simulate/disputes/advance": SimulateDisputesAdvance => Dispute, key = false, sandbox = true,
        "Sandbox: the network moves a dispute";
    "simulate/settlement/break": SimulateSettlementBreak => SettlementBreak, key = false, sandbox = true,
        "Sandbox: plants a settlement reconciliation break";
}

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

    /// `cards/reveal/create`: A single-use page showing a card's details to the
    /// cardholder's browser, framed by a page of `target_origin`. Hand `url` to that
    /// browser only; the details never pass through your server. A repeated call makes
    /// another session (the first is never used), so it is retried like a read.
    pub async fn cards_reveal_create(
        &self,
        request: &CardsRevealCreate,
    ) -> Result<RevealSession, ClientError> {
        self.typed("cards/reveal/create", request, None, Retry::Safe)
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

    /// `cards/limits/set`: Replaces a card's spending limits (not retried; setting the
    /// same list again is harmless).
    pub async fn cards_limits_set(
        &self,
        request: &CardsLimitsSet,
    ) -> Result<CardLimits, ClientError> {
        self.typed("cards/limits/set", request, None, Retry::Never)
            .await
    }

    /// `cards/limits/get`: A card's spending limits with what each window has counted.
    pub async fn cards_limits_get(
        &self,
        request: &CardsLimitsGet,
    ) -> Result<CardLimits, ClientError> {
        self.typed("cards/limits/get", request, None, Retry::Safe)
            .await
    }

    /// `rules/create`: Creates an authorization rule (not retried).
    pub async fn rules_create(&self, request: &RulesCreate) -> Result<Rule, ClientError> {
        self.typed("rules/create", request, None, Retry::Never)
            .await
    }

    /// `rules/update`: Changes a rule, raising its version (not retried).
    pub async fn rules_update(&self, request: &RulesUpdate) -> Result<Rule, ClientError> {
        self.typed("rules/update", request, None, Retry::Never)
            .await
    }

    /// `rules/get`: Reads a rule.
    pub async fn rules_get(&self, rule_id: &str) -> Result<Rule, ClientError> {
        let request = RuleRef {
            rule_id: rule_id.to_owned(),
        };
        self.typed("rules/get", &request, None, Retry::Safe).await
    }

    /// `rules/list`: The project's rules, newest first.
    pub async fn rules_list(&self, request: &RulesList) -> Result<Page<Rule>, ClientError> {
        self.typed("rules/list", request, None, Retry::Safe).await
    }

    /// `rules/delete`: Deletes a rule (not retried).
    pub async fn rules_delete(&self, rule_id: &str) -> Result<RuleDeleted, ClientError> {
        let request = RuleRef {
            rule_id: rule_id.to_owned(),
        };
        self.typed("rules/delete", &request, None, Retry::Never)
            .await
    }

    /// `rules/results`: Every match of an active or shadow rule, newest first.
    pub async fn rules_results(
        &self,
        request: &RulesResults,
    ) -> Result<Page<RuleResult>, ClientError> {
        self.typed("rules/results", request, None, Retry::Safe)
            .await
    }

    /// `wh/decision/set`: Sets the project's real-time decision webhook (retried like a
    /// read: setting it twice leaves it the same).
    pub async fn wh_decision_set(
        &self,
        request: &WhDecisionSet,
    ) -> Result<DecisionEndpoint, ClientError> {
        self.typed("wh/decision/set", request, None, Retry::Safe)
            .await
    }

    /// `wh/decision/get`: The project's decision webhook (`configured` false if none).
    pub async fn wh_decision_get(&self) -> Result<DecisionEndpoint, ClientError> {
        self.typed("wh/decision/get", &Empty {}, None, Retry::Safe)
            .await
    }

    /// `wh/decision/delete`: Removes the project's decision webhook (not retried).
    pub async fn wh_decision_delete(&self) -> Result<DecisionEndpoint, ClientError> {
        self.typed("wh/decision/delete", &Empty {}, None, Retry::Never)
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

    /// `simulate/project/deposit`: Sandbox: a confirmed USDT TRC20 deposit to the
    /// project's address, credited as the chain watcher credits one (not retried; a
    /// request with a `transaction_id` may be sent again safely: it is credited once).
    pub async fn simulate_project_deposit(
        &self,
        request: &SimulateProjectDeposit,
    ) -> Result<SimulatedDeposit, ClientError> {
        self.typed("simulate/project/deposit", request, None, Retry::Never)
            .await
    }

    /// `disputes/create`: disputes a settled card transaction for its cardholder.
    /// `idempotency_key` is sent as the `Idempotency-Key` header on every attempt, so a
    /// retry after a lost answer never opens a second dispute.
    pub async fn disputes_create(
        &self,
        request: &DisputesCreate,
        idempotency_key: &str,
    ) -> Result<Dispute, ClientError> {
        self.typed(
            "disputes/create",
            request,
            Some(idempotency_key),
            Retry::Safe,
        )
        .await
    }

    /// `disputes/get`: a dispute with its timeline and evidence metadata.
    pub async fn disputes_get(&self, dispute_id: &str) -> Result<Dispute, ClientError> {
        let request = DisputeRef {
            dispute_id: dispute_id.to_owned(),
        };
        self.typed("disputes/get", &request, None, Retry::Safe)
            .await
    }

    /// `disputes/find`: the project's disputes, newest first.
    pub async fn disputes_find(
        &self,
        request: &DisputesFind,
    ) -> Result<Page<Dispute>, ClientError> {
        self.typed("disputes/find", request, None, Retry::Safe)
            .await
    }

    /// `disputes/withdraw`: gives up a dispute that is not final (not retried).
    pub async fn disputes_withdraw(&self, dispute_id: &str) -> Result<Dispute, ClientError> {
        let request = DisputeRef {
            dispute_id: dispute_id.to_owned(),
        };
        self.typed("disputes/withdraw", &request, None, Retry::Never)
            .await
    }

    /// `disputes/evidence/add`: an evidence file for an open dispute (not retried).
    pub async fn disputes_evidence_add(
        &self,
        request: &DisputesEvidenceAdd,
    ) -> Result<Evidence, ClientError> {
        self.typed("disputes/evidence/add", request, None, Retry::Never)
            .await
    }

    /// `disputes/evidence/get`: an evidence file with its content (base64).
    pub async fn disputes_evidence_get(
        &self,
        dispute_id: &str,
        evidence_id: &str,
    ) -> Result<EvidenceFile, ClientError> {
        let request = DisputesEvidenceGet {
            dispute_id: dispute_id.to_owned(),
            evidence_id: evidence_id.to_owned(),
        };
        self.typed("disputes/evidence/get", &request, None, Retry::Safe)
            .await
    }

    /// `reports/create`: asks for a report built in the background (not retried: each
    /// call creates one).
    pub async fn reports_create(
        &self,
        request: &ReportsCreate,
    ) -> Result<ReportCreated, ClientError> {
        self.typed("reports/create", request, None, Retry::Never)
            .await
    }

    /// `reports/get`: a report; once ready, with a new `download_url` (one hour).
    pub async fn reports_get(&self, report_id: &str) -> Result<Report, ClientError> {
        let request = ReportRef {
            report_id: report_id.to_owned(),
        };
        self.typed("reports/get", &request, None, Retry::Safe).await
    }

    /// `simulate/disputes/advance`: Sandbox: the network moves a dispute (not retried).
    pub async fn simulate_disputes_advance(
        &self,
        request: &SimulateDisputesAdvance,
    ) -> Result<Dispute, ClientError> {
        self.typed("simulate/disputes/advance", request, None, Retry::Never)
            .await
    }

    /// `simulate/settlement/break`: Sandbox: plants a settlement reconciliation break in
    /// the sandbox provider's settlement records (not retried).
    pub async fn simulate_settlement_break(
        &self,
        request: &SimulateSettlementBreak,
    ) -> Result<SettlementBreak, ClientError> {
        self.typed("simulate/settlement/break", request, None, Retry::Never)
            .await
    }

    /// `cards/statement`: a card's funds over one UTC month (`period` `YYYY-MM`).
    pub async fn cards_statement(
        &self,
        request: &CardsStatement,
    ) -> Result<CardStatement, ClientError> {
        self.typed("cards/statement", request, None, Retry::Safe)
            .await
    }

    /// `project/statement`: the master balance over one UTC month.
    pub async fn project_statement(
        &self,
        request: &ProjectStatement,
    ) -> Result<ProjectStatementResponse, ClientError> {
        self.typed("project/statement", request, None, Retry::Safe)
            .await
    }

    /// `orders/check`: reads an order (see also [`Client::wait_order`]).
    pub async fn orders_check(&self, order_id: &str) -> Result<Order, ClientError> {
        let request = OrdersCheck {
            order_id: order_id.to_owned(),
        };
        self.typed("orders/check", &request, None, Retry::Safe)
            .await
    }

    /// `wh/unsubscribe`: deactivates a subscription and answers it. Retried like a read:
    /// unsubscribing twice changes nothing.
    pub async fn wh_unsubscribe(&self, id: &str) -> Result<Subscription, ClientError> {
        let request = WhUnsubscribe { id: id.to_owned() };
        self.typed("wh/unsubscribe", &request, None, Retry::Safe)
            .await
    }
}
