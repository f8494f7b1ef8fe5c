//! `issuing trigger EVENT`: makes the sandbox send a webhook event through real API
//! calls, like the Stripe CLI's `trigger`.
//!
//! Every event starts the same way: a user and cardholder `trigger-<random>` with
//! sandbox KYC data, a `virtual_usd` card (`virtual_usd_restricted` for `card_otp`, whose
//! 3DS method is OTP), and a wait for its issue order. Then, as the event needs:
//! a topup of 10, freeze, unfreeze, close, `simulate/cards/auth` or `simulate/cards/3ds`.
//! `card_transaction.declined_by_limit` sets a daily limit of 1.00 on the card
//! (`cards/limits/set`), spends it, and asks again: the second authorization is
//! declined with `spending_limit_exceeded` (its `card_transaction` event carries the
//! `decline` object). `card.details_viewed` makes a reveal session for
//! `http://localhost` (`cards/reveal/create`) and opens its page once, as a
//! cardholder's browser would (the page's content is never printed).
//! `dispute.updated` tops the card up, buys and settles a purchase
//! (`simulate/cards/auth`, `simulate/cards/clear`), disputes it with a provisional
//! credit (`disputes/create`) and wins it (`simulate/disputes/advance`): one event for
//! the new dispute, one for `won`.
//! `report.ready` asks for a CSV report of the project's cards of the last hour
//! (`reports/create`, which includes the new card) and waits for it (`reports/get`).
//! The events along the way (`card.created`, …) are sent too.
//!
//! stdout: one JSON line, e.g. `{"event":"card.freeze","card_id":"…","status":"frozen"}`.
//! stderr: a line per step and `waiting for order <id>: <status>…` while an order runs.
//! Exit code 0 on success, 1 when a call fails or an order fails or times out, 2 on an
//! unknown event or unusable credentials.

use crate::remote::RemoteArgs;
use issuing_client::{
    Address, CardLimit, CardholdersCreate, CardsClose, CardsCreate, CardsFreeze, CardsLimitsSet,
    CardsRevealCreate, CardsTopup, Client, ClientError, DisputesCreate, KycData, Merchant, Order,
    Report, ReportsCreate, Simulate3ds, SimulateAuth, SimulateClear, SimulateDisputesAdvance,
    SimulatedTransaction,
};
use serde_json::{json, Value};
use std::process::ExitCode;
use std::time::Duration;

/// The events `trigger` can produce.
pub const EVENTS: [&str; 12] = [
    "card.created",
    "card.topup",
    "card.freeze",
    "card.unfreeze",
    "card.close",
    "card.details_viewed",
    "card_transaction",
    "card_transaction.declined_by_limit",
    "card_3ds",
    "card_otp",
    "dispute.updated",
    "report.ready",
];

/// How long an order may take before the trigger gives up.
const ORDER_TIMEOUT: Duration = Duration::from_secs(60);
/// What `card.topup` and `card_transaction` load onto the card.
const TOPUP_AMOUNT: &str = "10";
/// What the simulated purchases ask for.
const PURCHASE_AMOUNT: &str = "1.00";

#[derive(clap::Args)]
pub struct TriggerArgs {
    #[command(flatten)]
    remote: RemoteArgs,
    /// The event to produce: card.created, card.topup, card.freeze, card.unfreeze,
    /// card.close, card.details_viewed, card_transaction,
    /// card_transaction.declined_by_limit, card_3ds, card_otp, dispute.updated or
    /// report.ready.
    event: String,
}

/// Why a trigger failed: its message is printed on stderr.
struct Failed(String);

impl From<ClientError> for Failed {
    fn from(e: ClientError) -> Failed {
        Failed(e.to_string())
    }
}

pub async fn run(args: TriggerArgs) -> anyhow::Result<ExitCode> {
    let event = args.event.trim();
    if !EVENTS.contains(&event) {
        eprintln!(
            "error: unknown event `{event}`; known events: {}",
            EVENTS.join(", ")
        );
        return Ok(ExitCode::from(2));
    }
    let client = args.remote.client()?;
    match trigger(&client, event).await {
        Ok(summary) => {
            println!("{summary}");
            Ok(ExitCode::SUCCESS)
        }
        Err(Failed(message)) => {
            eprintln!("error: {event}: {message}");
            Ok(ExitCode::from(1))
        }
    }
}

async fn trigger(client: &Client, event: &str) -> Result<Value, Failed> {
    let tag = format!("trigger-{:016x}", rand::random::<u64>());
    let otp = event == "card_otp";
    let (subprovider, product) = if otp {
        ("sandbox_restricted", "virtual_usd_restricted")
    } else {
        ("sandbox", "virtual_usd")
    };

    client
        .cardholders_create(&CardholdersCreate {
            external_user_id: tag.clone(),
            subprovider_code: subprovider.into(),
            product_code: otp.then(|| product.to_owned()),
            kyc_data: Some(kyc()),
        })
        .await?;
    eprintln!("created user and cardholder {tag} ({subprovider})");

    let created = client
        .cards_create(
            &CardsCreate {
                external_user_id: tag.clone(),
                product_code: product.into(),
                ..CardsCreate::default()
            },
            &format!("{tag}-issue"),
        )
        .await?;
    let card_id = created.card_id;
    let order_id = created.order.order_id;
    eprintln!("created card {card_id} ({product}), order {order_id}");
    wait_order(client, &order_id).await?;

    let summary = match event {
        "card.created" => json!({"event": event, "card_id": card_id, "order_id": order_id}),
        "card.topup" => {
            let order_id = topup(client, &tag, &card_id).await?;
            json!({"event": event, "card_id": card_id, "order_id": order_id})
        }
        "card.freeze" => {
            let status = set_frozen(client, &card_id, true).await?;
            json!({"event": event, "card_id": card_id, "status": status})
        }
        "card.unfreeze" => {
            set_frozen(client, &card_id, true).await?;
            let status = set_frozen(client, &card_id, false).await?;
            json!({"event": event, "card_id": card_id, "status": status})
        }
        "card.close" => {
            let closed = client
                .cards_close(
                    &CardsClose {
                        card_id: card_id.clone(),
                        reason: Some("issuing trigger".into()),
                        ..CardsClose::default()
                    },
                    &format!("{tag}-close"),
                )
                .await?;
            eprintln!("closed card {card_id}");
            json!({"event": event, "card_id": card_id,
                   "order_id": closed.order.order_id, "status": closed.status})
        }
        "card.details_viewed" => {
            let reveal_id = open_reveal_page(client, &tag, &card_id).await?;
            json!({"event": event, "card_id": card_id, "reveal_id": reveal_id})
        }
        "card_transaction" => {
            topup(client, &tag, &card_id).await?;
            let auth = purchase(client, &card_id).await?;
            let transaction_id = auth.transaction_id;
            eprintln!(
                "authorized {PURCHASE_AMOUNT} on card {card_id}: transaction {transaction_id}"
            );
            json!({"event": event, "card_id": card_id, "transaction_id": transaction_id})
        }
        "card_transaction.declined_by_limit" => {
            topup(client, &tag, &card_id).await?;
            client
                .cards_limits_set(&CardsLimitsSet {
                    card_id: card_id.clone(),
                    limits: vec![CardLimit {
                        interval: "daily".into(),
                        amount: Some(PURCHASE_AMOUNT.into()),
                        ..CardLimit::default()
                    }],
                    ..CardsLimitsSet::default()
                })
                .await?;
            eprintln!("set a daily limit of {PURCHASE_AMOUNT} on card {card_id}");
            let first = purchase(client, &card_id).await?;
            eprintln!(
                "authorized {PURCHASE_AMOUNT}: transaction {}",
                first.transaction_id
            );
            let second = purchase(client, &card_id).await?;
            let data = &second.transaction.card_tx_data;
            let reason = data.failure_reason.clone().unwrap_or_default();
            if reason != "spending_limit_exceeded" {
                return Err(Failed(format!(
                    "the second authorization was not declined by the limit: {} {reason}",
                    data.status
                )));
            }
            eprintln!(
                "declined {PURCHASE_AMOUNT} over the limit: transaction {}",
                second.transaction_id
            );
            json!({"event": event, "card_id": card_id, "transaction_id": second.transaction_id,
                   "failure_reason": reason})
        }
        "card_3ds" | "card_otp" => {
            let challenge = client
                .simulate_cards_3ds(&Simulate3ds {
                    card_id: card_id.clone(),
                    amount: PURCHASE_AMOUNT.into(),
                    ..Simulate3ds::default()
                })
                .await?;
            eprintln!("requested a 3-D Secure check of {PURCHASE_AMOUNT} on card {card_id}");
            let mut summary = json!({"event": event, "card_id": card_id});
            for (field, value) in [
                ("securement_id", challenge.securement_id),
                ("method", Some(challenge.method)),
                ("code", challenge.code),
            ] {
                if let Some(v) = value {
                    summary[field] = json!(v);
                }
            }
            summary
        }
        "dispute.updated" => {
            topup(client, &tag, &card_id).await?;
            let auth = purchase(client, &card_id).await?;
            let transaction_id = auth.transaction_id;
            client
                .simulate_cards_clear(&SimulateClear {
                    transaction_id: Some(transaction_id.clone()),
                    ..SimulateClear::default()
                })
                .await?;
            eprintln!("bought and settled {PURCHASE_AMOUNT}: transaction {transaction_id}");
            let dispute = client
                .disputes_create(
                    &DisputesCreate {
                        transaction_id: transaction_id.clone(),
                        reason: "goods_services_not_received".into(),
                        provisional_credit: Some(true),
                        ..DisputesCreate::default()
                    },
                    &format!("{tag}-dispute"),
                )
                .await?;
            eprintln!(
                "disputed it: dispute {} ({})",
                dispute.dispute_id, dispute.status
            );
            let won = client
                .simulate_disputes_advance(&SimulateDisputesAdvance {
                    dispute_id: dispute.dispute_id.clone(),
                    to: "won".into(),
                    resolution_reason: None,
                })
                .await?;
            eprintln!("the network decided: {}", won.status);
            json!({"event": event, "card_id": card_id, "transaction_id": transaction_id,
                   "dispute_id": won.dispute_id, "status": won.status})
        }
        "report.ready" => {
            use issuing_domain::time::{now_micros, to_rfc3339};
            const HOUR: i64 = 3600 * 1_000_000;
            let now = now_micros();
            let created = client
                .reports_create(&ReportsCreate {
                    report_type: "cards".into(),
                    from: to_rfc3339(now - HOUR),
                    to: to_rfc3339(now + 60 * 1_000_000),
                    format: "csv".into(),
                })
                .await?;
            eprintln!("asked for report {}", created.report_id);
            let report = wait_report(client, &created.report_id).await?;
            json!({"event": event, "card_id": card_id, "report_id": report.report_id,
                   "status": report.status, "row_count": report.row_count})
        }
        other => return Err(Failed(format!("no recipe for {other}"))),
    };
    Ok(summary)
}

/// Waits for a report to be built (ready or failed).
async fn wait_report(client: &Client, report_id: &str) -> Result<Report, Failed> {
    let deadline = tokio::time::Instant::now() + ORDER_TIMEOUT;
    loop {
        let report = client.reports_get(report_id).await?;
        if report.status != "processing" {
            eprintln!("report {report_id}: {}", report.status);
            return Ok(report);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Failed(format!("report {report_id} is still processing")));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Makes a reveal session and opens its page once, as the cardholder's browser would
/// (no `Referer`): the server then sends `card.details_viewed`. Answers the session's
/// id; the page (the card's details) is read and dropped, never printed.
async fn open_reveal_page(client: &Client, tag: &str, card_id: &str) -> Result<String, Failed> {
    let session = client
        .cards_reveal_create(&CardsRevealCreate {
            card_id: card_id.to_owned(),
            external_user_id: Some(tag.to_owned()),
            target_origin: "http://localhost".into(),
            ttl_seconds: None,
        })
        .await?;
    eprintln!(
        "created reveal session {} for card {card_id}",
        session.reveal_id
    );
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| Failed(format!("HTTP client: {e}")))?;
    // The error would name the URL, which holds the session's token.
    let status = http
        .get(&session.url)
        .send()
        .await
        .map_err(|e| {
            Failed(format!(
                "opening the reveal page failed: {}",
                e.without_url()
            ))
        })?
        .status();
    if status != reqwest::StatusCode::OK {
        return Err(Failed(format!("the reveal page answered {status}")));
    }
    eprintln!("opened the reveal page of session {}", session.reveal_id);
    Ok(session.reveal_id)
}

/// A simulated purchase of [`PURCHASE_AMOUNT`] on the card.
async fn purchase(client: &Client, card_id: &str) -> Result<SimulatedTransaction, Failed> {
    Ok(client
        .simulate_cards_auth(&SimulateAuth {
            card_id: card_id.to_owned(),
            transaction_amount: PURCHASE_AMOUNT.into(),
            merchant: Some(Merchant {
                name: Some("issuing trigger".into()),
                mcc: Some("5814".into()),
                country: Some("US".into()),
            }),
            ..SimulateAuth::default()
        })
        .await?)
}

/// Tops the card up with [`TOPUP_AMOUNT`] and waits for the order; returns its id.
async fn topup(client: &Client, tag: &str, card_id: &str) -> Result<String, Failed> {
    let order = client
        .cards_topup(
            &CardsTopup {
                card_id: card_id.to_owned(),
                amount: TOPUP_AMOUNT.into(),
                ..CardsTopup::default()
            },
            &format!("{tag}-topup"),
        )
        .await?;
    let order_id = order.order_id;
    eprintln!("topup of {TOPUP_AMOUNT} on card {card_id}, order {order_id}");
    wait_order(client, &order_id).await?;
    Ok(order_id)
}

/// Freezes or unfreezes the card; returns its new status.
async fn set_frozen(client: &Client, card_id: &str, frozen: bool) -> Result<String, Failed> {
    let request = CardsFreeze::new(card_id);
    let (path, answer) = if frozen {
        ("cards/freeze", client.cards_freeze(&request).await?)
    } else {
        ("cards/unfreeze", client.cards_unfreeze(&request).await?)
    };
    eprintln!("{path}: card {card_id} is {}", answer.status);
    Ok(answer.status)
}

/// Waits for the order to be completed (Ok) or failed (Err), printing each status it
/// sees; gives up after [`ORDER_TIMEOUT`].
async fn wait_order(client: &Client, order_id: &str) -> Result<(), Failed> {
    let mut last = String::new();
    let order: Order = client
        .wait_order_with_progress(order_id, ORDER_TIMEOUT, |order| {
            if order.status != last {
                eprintln!("waiting for order {order_id}: {}…", order.status);
                last.clone_from(&order.status);
            }
        })
        .await?;
    if order.is_failed() {
        let reason = order
            .last_error_slug
            .as_deref()
            .unwrap_or("no reason given");
        return Err(Failed(format!("order {order_id} failed: {reason}")));
    }
    Ok(())
}

/// KYC data the sandbox approves at once.
pub(crate) fn kyc() -> KycData {
    KycData {
        first_name: "Trigger".into(),
        last_name: "Lovelace".into(),
        birth_date: "1990-12-10".into(),
        email: "trigger@example.com".into(),
        phone_number_full: "+447700900123".into(),
        country_iso: "GB".into(),
        address: Some(Address {
            line1: Some("1 Analytical Way".into()),
            city: Some("London".into()),
            postal_code: Some("N1 1AA".into()),
            country_iso: Some("GB".into()),
            ..Address::default()
        }),
        id_document: None,
    }
}
