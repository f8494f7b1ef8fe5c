//! `issuing trigger EVENT`: makes the sandbox send a webhook event through real API
//! calls, like the Stripe CLI's `trigger`.
//!
//! Every event starts the same way: a user and cardholder `trigger-<random>` with
//! sandbox KYC data, a `virtual_usd` card (`virtual_usd_restricted` for `card_otp`, whose
//! 3DS method is OTP), and a wait for its issue order. Then, as the event needs:
//! a topup of 10, freeze, unfreeze, close, `simulate/cards/auth` or `simulate/cards/3ds`.
//! The events along the way (`card.created`, …) are sent too.
//!
//! stdout: one JSON line, e.g. `{"event":"card.freeze","card_id":"…","status":"frozen"}`.
//! stderr: a line per step and `waiting for order <id>: <status>…` while an order runs.
//! Exit code 0 on success, 1 when a call fails or an order fails or times out, 2 on an
//! unknown event or unusable credentials.

use crate::remote::RemoteArgs;
use issuing_client::{Client, ClientError};
use serde_json::{json, Value};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The events `trigger` can produce.
pub const EVENTS: [&str; 8] = [
    "card.created",
    "card.topup",
    "card.freeze",
    "card.unfreeze",
    "card.close",
    "card_transaction",
    "card_3ds",
    "card_otp",
];

/// How long an order may take before the trigger gives up.
const ORDER_TIMEOUT: Duration = Duration::from_secs(60);
const POLL_INTERVAL: Duration = Duration::from_millis(200);
/// What `card.topup` and `card_transaction` load onto the card.
const TOPUP_AMOUNT: &str = "10";
/// What the simulated purchases ask for.
const PURCHASE_AMOUNT: &str = "1.00";

#[derive(clap::Args)]
pub struct TriggerArgs {
    #[command(flatten)]
    remote: RemoteArgs,
    /// The event to produce: card.created, card.topup, card.freeze, card.unfreeze,
    /// card.close, card_transaction, card_3ds or card_otp.
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

    let mut cardholder = json!({
        "external_user_id": tag,
        "subprovider_code": subprovider,
        "kyc_data": kyc(),
    });
    if otp {
        cardholder["product_code"] = json!(product);
    }
    client.call("cardholders/create", cardholder).await?;
    eprintln!("created user and cardholder {tag} ({subprovider})");

    let created = client
        .call(
            "cards/create",
            json!({"external_user_id": tag, "product_code": product,
                   "idempotency_key": format!("{tag}-issue")}),
        )
        .await?;
    let card_id = text(&created, &["card_id"])?;
    let order_id = text(&created, &["order", "order_id"])?;
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
                .call(
                    "cards/close",
                    json!({"card_id": card_id, "reason": "issuing trigger",
                           "idempotency_key": format!("{tag}-close")}),
                )
                .await?;
            eprintln!("closed card {card_id}");
            json!({"event": event, "card_id": card_id,
                   "order_id": text(&closed, &["order", "order_id"])?, "status": "closed"})
        }
        "card_transaction" => {
            topup(client, &tag, &card_id).await?;
            let auth = client
                .call(
                    "simulate/cards/auth",
                    json!({"card_id": card_id, "transactionAmount": PURCHASE_AMOUNT,
                           "merchant": {"name": "issuing trigger", "mcc": "5814", "country": "US"}}),
                )
                .await?;
            let transaction_id = text(&auth, &["transactionId"])?;
            eprintln!(
                "authorized {PURCHASE_AMOUNT} on card {card_id}: transaction {transaction_id}"
            );
            json!({"event": event, "card_id": card_id, "transaction_id": transaction_id})
        }
        "card_3ds" | "card_otp" => {
            let challenge = client
                .call(
                    "simulate/cards/3ds",
                    json!({"card_id": card_id, "amount": PURCHASE_AMOUNT}),
                )
                .await?;
            eprintln!("requested a 3-D Secure check of {PURCHASE_AMOUNT} on card {card_id}");
            let mut summary = json!({"event": event, "card_id": card_id});
            for field in ["securement_id", "method", "code"] {
                if let Some(v) = challenge.get(field) {
                    summary[field] = v.clone();
                }
            }
            summary
        }
        other => return Err(Failed(format!("no recipe for {other}"))),
    };
    Ok(summary)
}

/// Tops the card up with [`TOPUP_AMOUNT`] and waits for the order; returns its id.
async fn topup(client: &Client, tag: &str, card_id: &str) -> Result<String, Failed> {
    let order = client
        .call(
            "cards/topup",
            json!({"card_id": card_id, "amount": TOPUP_AMOUNT,
                   "idempotency_key": format!("{tag}-topup")}),
        )
        .await?;
    let order_id = text(&order, &["order_id"]).or_else(|_| text(&order, &["order", "order_id"]))?;
    eprintln!("topup of {TOPUP_AMOUNT} on card {card_id}, order {order_id}");
    wait_order(client, &order_id).await?;
    Ok(order_id)
}

/// Freezes or unfreezes the card; returns its new status.
async fn set_frozen(client: &Client, card_id: &str, frozen: bool) -> Result<String, Failed> {
    let path = if frozen {
        "cards/freeze"
    } else {
        "cards/unfreeze"
    };
    let v = client.call(path, json!({"card_id": card_id})).await?;
    let status = text(&v, &["status"])?;
    eprintln!("{path}: card {card_id} is {status}");
    Ok(status)
}

/// Polls `orders/check` until the order is completed (Ok) or failed (Err), printing each
/// status it sees; gives up after [`ORDER_TIMEOUT`].
async fn wait_order(client: &Client, order_id: &str) -> Result<(), Failed> {
    let started = Instant::now();
    let mut last = String::new();
    loop {
        let v = client
            .call("orders/check", json!({"order_id": order_id}))
            .await?;
        let status = v.get("status").and_then(Value::as_str).unwrap_or("unknown");
        if status != last {
            eprintln!("waiting for order {order_id}: {status}…");
            last = status.to_owned();
        }
        match status {
            "completed" => return Ok(()),
            "failed" => {
                let reason = v
                    .get("last_error_slug")
                    .and_then(Value::as_str)
                    .unwrap_or("no reason given");
                return Err(Failed(format!("order {order_id} failed: {reason}")));
            }
            _ => {}
        }
        if started.elapsed() >= ORDER_TIMEOUT {
            return Err(Failed(format!(
                "order {order_id} is still {status} after {} s",
                ORDER_TIMEOUT.as_secs()
            )));
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// The string at `path` in an answer.
fn text(v: &Value, path: &[&str]) -> Result<String, Failed> {
    let mut at = v;
    for key in path {
        at = at.get(key).unwrap_or(&Value::Null);
    }
    at.as_str()
        .map(str::to_owned)
        .ok_or_else(|| Failed(format!("the answer has no `{}`: {v}", path.join("."))))
}

/// KYC data the sandbox approves at once.
fn kyc() -> Value {
    json!({
        "first_name": "Trigger",
        "last_name": "Lovelace",
        "birth_date": "1990-12-10",
        "email": "trigger@example.com",
        "phone_number_full": "+447700900123",
        "country_iso": "GB",
        "address": {"line1": "1 Analytical Way", "city": "London", "postal_code": "N1 1AA", "country_iso": "GB"}
    })
}
