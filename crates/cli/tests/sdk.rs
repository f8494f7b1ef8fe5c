//! The Rust client's typed methods against a real server: a full flow from users to card
//! transactions and webhooks, and errors with their slugs. Only typed calls are used.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::TestServer;
use issuing_client::{
    CardRef, CardholdersCreate, CardholdersFind, CardholdersGet, CardsClose, CardsCreate,
    CardsFind, CardsFreeze, CardsTopup, CardsTxs, Client, ClientError, KycData, ListQuery,
    Merchant, ProjectTxs, SimulateAuth, SimulateClear, UsersCreate, UsersFind, UsersGet,
    WhSubscribe,
};
use std::time::Duration;

const ORDER_TIMEOUT: Duration = Duration::from_secs(30);

fn kyc() -> KycData {
    serde_json::from_value(common::cards::kyc()).unwrap()
}

fn client(t: &TestServer) -> Client {
    Client::new(&t.base, &t.creds.api_key, &t.creds.api_secret).unwrap()
}

fn micros(d: &issuing_client::Decimal) -> i64 {
    d.to_micros().unwrap()
}

both_backends!(typed_full_flow, |t: TestServer| async move {
    let c = client(&t);
    t.deposit(&t.creds.project_id, 500_000_000).await;

    assert_eq!(c.system_health().await.unwrap().status, "ok");
    let offset = c.sync_clock().await.unwrap();
    assert!(offset.abs() < 5_000_000, "{offset}");
    let start_balance = c.project_balance().await.unwrap();
    assert_eq!(start_balance.currency, "usdt");
    assert!(micros(&start_balance.available) >= 500_000_000);
    let wallet = c.project_wallet_trc20().await.unwrap();
    assert!(wallet.usdt_trc20.starts_with('T'));

    // Users.
    let user = c
        .users_create(&UsersCreate {
            external_user_id: "sdk-alice".into(),
        })
        .await
        .unwrap();
    assert_eq!(user.external_user_id, "sdk-alice");
    assert_eq!(user.project_id, t.creds.project_id);
    let got = c
        .users_get(&UsersGet {
            external_user_id: "sdk-alice".into(),
        })
        .await
        .unwrap();
    assert_eq!(got.user_id, user.user_id);
    let page = c
        .users_find(&UsersFind {
            external_user_ids: vec!["sdk-alice".into(), "nobody".into()],
            ..UsersFind::default()
        })
        .await
        .unwrap();
    assert_eq!((page.total, page.items.len()), (1, 1));
    assert_eq!((page.skip, page.limit), (0, 20));

    // Cardholder with KYC: ready at once in the sandbox.
    let holder = c
        .cardholders_create(&CardholdersCreate {
            external_user_id: "sdk-alice".into(),
            subprovider_code: "sandbox".into(),
            kyc_data: Some(kyc()),
            ..CardholdersCreate::default()
        })
        .await
        .unwrap();
    assert!(holder.is_ready(), "{holder:?}");
    let by_user = c
        .cardholders_get(&CardholdersGet::by_user("sdk-alice", "sandbox"))
        .await
        .unwrap();
    assert_eq!(by_user.cardholder_id, holder.cardholder_id);
    let found = c
        .cardholders_find(&CardholdersFind {
            kyc_statuses: vec!["approved".into()],
            ..CardholdersFind::default()
        })
        .await
        .unwrap();
    assert_eq!(found.total, 1);

    // Products and a card.
    let products = c.cards_products().await.unwrap();
    let usd = products
        .items
        .iter()
        .find(|p| p.product_code == "virtual_usd")
        .unwrap();
    assert!(usd.active && usd.pricing.valid);
    let request = CardsCreate {
        external_user_id: "sdk-alice".into(),
        product_code: "virtual_usd".into(),
        ..CardsCreate::default()
    };
    let created = c.cards_create(&request, "sdk-issue-1").await.unwrap();
    assert_eq!(created.status, "pending");
    assert_eq!(created.order.order_type, "card_issue");
    // The same key answers the original response.
    let again = c.cards_create(&request, "sdk-issue-1").await.unwrap();
    assert_eq!(again.card_id, created.card_id);
    let mut seen = Vec::new();
    let issued = c
        .wait_order_with_progress(&created.order.order_id, ORDER_TIMEOUT, |o| {
            seen.push(o.status.clone())
        })
        .await
        .unwrap();
    assert!(issued.is_completed(), "{issued:?}");
    assert_eq!(issued.is_issued, Some(true));
    assert_eq!(seen.last().map(String::as_str), Some("completed"));

    let card_ref = CardRef::new(&created.card_id, "sdk-alice");
    let card = c.cards_get(&card_ref).await.unwrap();
    assert_eq!(card.status, "active");
    assert!(card.label.is_some());

    // Topup.
    let topup = c
        .cards_topup(
            &CardsTopup {
                card_id: card.card_id.clone(),
                amount: "50.00".into(),
                ..CardsTopup::default()
            },
            "sdk-topup-1",
        )
        .await
        .unwrap();
    assert_eq!(topup.order_type, "card_topup");
    assert!(c
        .wait_order(&topup.order_id, ORDER_TIMEOUT)
        .await
        .unwrap()
        .is_completed());
    let balance = c.cards_balance(&card_ref).await.unwrap();
    assert_eq!(micros(&balance.available), 50_000_000);
    assert_eq!(micros(&balance.pending), 0);
    let details = c.cards_details(&card_ref).await.unwrap();
    assert_eq!(details.details.card_number.len(), 16);
    assert!(!format!("{details:?}").contains(&details.details.card_number));

    // Card network: authorize 30, clear at 32.
    let auth = c
        .simulate_cards_auth(&SimulateAuth {
            card_id: card.card_id.clone(),
            transaction_amount: "30.00".into(),
            merchant: Some(Merchant {
                name: Some("Coffee Shop".into()),
                mcc: Some("5814".into()),
                country: Some("GB".into()),
            }),
            ..SimulateAuth::default()
        })
        .await
        .unwrap();
    let data = &auth.transaction.card_tx_data;
    assert_eq!(
        (data.kind.as_str(), data.status.as_str()),
        ("auth", "pending")
    );
    assert_eq!(data.card_amount, 30.0);
    let balance = c.cards_balance(&card_ref).await.unwrap();
    assert_eq!(
        (micros(&balance.available), micros(&balance.pending)),
        (20_000_000, 30_000_000)
    );
    let cleared = c
        .simulate_cards_clear(&SimulateClear {
            transaction_id: Some(auth.transaction_id.clone()),
            bill_amount: Some("32.00".into()),
            ..SimulateClear::default()
        })
        .await
        .unwrap();
    assert_eq!(cleared.transaction_id, auth.transaction_id);
    assert_eq!(cleared.transaction.card_tx_data.status, "approved");
    assert_eq!(cleared.transaction.card_tx_data.card_amount, 32.0);
    let txs = c
        .cards_txs(&CardsTxs {
            card_id: card.card_id.clone(),
            external_user_id: "sdk-alice".into(),
            ..CardsTxs::default()
        })
        .await
        .unwrap();
    assert_eq!(txs.total, 1);
    assert_eq!(txs.items[0].transaction_id, auth.transaction_id);
    assert_eq!(txs.items[0].tx_type, "transaction_updated_auth_approved");

    // Freeze and unfreeze, find, project history.
    let frozen = c
        .cards_freeze(&CardsFreeze::new(&card.card_id))
        .await
        .unwrap();
    assert_eq!(frozen.status, "frozen");
    let active = c
        .cards_unfreeze(&CardsFreeze::new(&card.card_id))
        .await
        .unwrap();
    assert_eq!(active.status, "active");
    let cards = c
        .cards_find(&CardsFind {
            statuses: vec!["active".into()],
            page: ListQuery {
                limit: Some(5),
                ..ListQuery::default()
            },
            ..CardsFind::default()
        })
        .await
        .unwrap();
    assert_eq!((cards.total, cards.limit), (1, 5));
    let txs = c
        .project_txs(&ProjectTxs {
            order_ids: vec![topup.order_id.clone()],
            ..ProjectTxs::default()
        })
        .await
        .unwrap();
    assert!(txs.total >= 1);
    assert!(txs.items.iter().all(|i| micros(&i.amount) < 0));

    // Webhooks.
    let sub = c
        .wh_subscribe(&WhSubscribe {
            url: "http://127.0.0.1:9/hook".into(),
            title: Some("sdk".into()),
            event_types: vec!["card.close".into()],
        })
        .await
        .unwrap();
    assert!(sub.active);
    assert_eq!(sub.event_types, ["card.close"]);
    let subs = c.wh_subscriptions(&ListQuery::default()).await.unwrap();
    assert_eq!(subs.items[0].id, sub.id);
    let off = c.wh_unsubscribe(&sub.id).await.unwrap();
    assert!(!off.active);

    // Close: the card's 18.00 goes back through a withdraw order.
    let closed = c
        .cards_close(
            &CardsClose {
                card_id: card.card_id.clone(),
                reason: Some("sdk test".into()),
                ..CardsClose::default()
            },
            "sdk-close-1",
        )
        .await
        .unwrap();
    assert_eq!(closed.status, "closed");
    assert!(closed.order.is_completed());
    let withdraw = closed.withdraw_order.expect("the card held money");
    assert_eq!(withdraw.data["amount"], "18.00");
    assert!(c
        .wait_order(&withdraw.order_id, ORDER_TIMEOUT)
        .await
        .unwrap()
        .is_completed());
});

both_backends!(typed_errors_keep_their_slugs, |t: TestServer| async move {
    let c = client(&t);
    let expect = |r: Result<_, ClientError>, status: u16, slug: &str| match r {
        Err(ClientError::Api {
            status: s, slug: g, ..
        }) => assert_eq!((s, g.as_str()), (status, slug)),
        other => panic!("expected {status} {slug}, got {:?}", other.map(|_| ())),
    };
    expect(
        c.users_get(&UsersGet {
            external_user_id: "ghost".into(),
        })
        .await
        .map(|_| ()),
        404,
        "user_not_found",
    );
    c.users_create(&UsersCreate {
        external_user_id: "dup".into(),
    })
    .await
    .unwrap();
    expect(
        c.users_create(&UsersCreate {
            external_user_id: "dup".into(),
        })
        .await
        .map(|_| ()),
        409,
        "user_already_exists",
    );
    expect(
        c.cards_get(&CardRef::new("6b01fc4d3a3e7305afcecad5", "dup"))
            .await
            .map(|_| ()),
        404,
        "card_not_found",
    );
    expect(
        c.orders_check("6b01fc4d0e5e5f435c9ada99").await.map(|_| ()),
        404,
        "order_not_found",
    );
    expect(
        c.cards_topup(
            &CardsTopup {
                card_id: "6b01fc4d3a3e7305afcecad5".into(),
                amount: "1e3".into(),
                ..CardsTopup::default()
            },
            "bad-amount",
        )
        .await
        .map(|_| ()),
        400,
        "invalid_amount",
    );
    expect(
        c.cardholders_create(&CardholdersCreate {
            external_user_id: "dup".into(),
            subprovider_code: "sandbox".into(),
            kyc_data: Some(KycData {
                email: "not an email".into(),
                ..kyc()
            }),
            ..CardholdersCreate::default()
        })
        .await
        .map(|_| ()),
        400,
        "validation_error",
    );

    // A skewed clock is corrected on the fly.
    c.set_clock_offset_micros(-600_000_000);
    c.project_balance().await.unwrap();
    assert!(c.clock_offset_micros().abs() < 5_000_000);

    // Wrong credentials: the plain authentication error, typed.
    let wrong = Client::new(&t.base, "pk_unknown", &t.creds.api_secret).unwrap();
    expect(
        wrong.system_health().await.map(|_| ()),
        401,
        "api_key_not_found",
    );
});
