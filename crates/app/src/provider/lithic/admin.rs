//! Operator commands for `lithic` subproviders (CONTRACT §14), run by
//! `issuing admin provider enroll|status`: registering our ASA responder and event
//! subscription with Lithic, and fetching their signing secrets, which are stored
//! sealed with the master key.

use super::client::{Client, Retry};
use crate::config::ProviderKeys;
use crate::MasterKey;
use anyhow::{bail, Context};
use issuing_domain::catalog::{Catalog, LithicSettings, ProviderKind};
use issuing_domain::time::{now_micros, to_rfc3339};
use issuing_store::{lithic as records, Store};
use reqwest::Method;
use serde_json::{json, Value};
use std::sync::Arc;

/// The events our subscription asks for (CONTRACT §14): `dispute.updated` drives our
/// disputes of Lithic cards (CONTRACT §15), and `embed.viewed` (a cardholder saw a
/// card's details in Lithic's embed, CONTRACT §16) is recorded in the audit log.
pub const EVENT_TYPES: [&str; 5] = [
    "card_transaction.updated",
    "account_holder.verification",
    "account_holder.created",
    "dispute.updated",
    "embed.viewed",
];
/// Names our subscription in Lithic's dashboard, and finds it again on a re-enrolment.
const SUBSCRIPTION_DESCRIPTION: &str =
    "issuing: card transactions, account holders, disputes, embeds";

fn lithic_settings<'a>(catalog: &'a Catalog, code: &str) -> anyhow::Result<&'a LithicSettings> {
    match catalog.subprovider(code).map(|s| &s.kind) {
        Some(ProviderKind::Lithic(settings)) => Ok(settings),
        Some(_) => bail!("subprovider {code} is not of kind lithic"),
        None => bail!("no subprovider {code} in the catalog"),
    }
}

fn client(code: &str, settings: &LithicSettings, keys: &ProviderKeys) -> anyhow::Result<Client> {
    let key = keys
        .get(code)
        .with_context(|| format!("{} is not set", settings.api_key_env))?;
    Ok(Client::new(
        code,
        &settings.base_url,
        key,
        Arc::new(crate::metrics::Metrics::default()),
    )?)
}

/// The Lithic program of subprovider `code`, for a command that reads from Lithic.
pub fn provider(
    store: &Store,
    master: &MasterKey,
    catalog: &Catalog,
    keys: &ProviderKeys,
    code: &str,
) -> anyhow::Result<super::LithicProvider> {
    let settings = lithic_settings(catalog, code)?;
    let key = keys
        .get(code)
        .with_context(|| format!("{} is not set", settings.api_key_env))?;
    let deps = super::Deps {
        store: store.clone(),
        master: master.clone(),
        metrics: Arc::new(crate::metrics::Metrics::default()),
    };
    super::LithicProvider::new(code, settings, key, &deps)
}

/// Our two endpoints under a public base URL.
fn endpoints(public_url: &str, code: &str) -> anyhow::Result<(String, String, String)> {
    let base = public_url.trim().trim_end_matches('/');
    let parsed = url::Url::parse(base).ok().filter(|u| {
        matches!(u.scheme(), "http" | "https")
            && u.host().is_some()
            && u.query().is_none()
            && u.fragment().is_none()
            && u.username().is_empty()
    });
    if parsed.is_none() {
        bail!("--public-url must be the http(s) URL Lithic reaches this service at, such as https://issuing.example.com");
    }
    Ok((
        base.to_owned(),
        format!("{base}/provider/lithic/{code}/asa"),
        format!("{base}/provider/lithic/{code}/events"),
    ))
}

fn secret_of(v: &Value, what: &str) -> anyhow::Result<String> {
    v.get("secret")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .with_context(|| format!("Lithic answered no {what} secret"))
}

/// Enrols the subprovider: the ASA responder at `<public_url>/provider/lithic/<code>/asa`,
/// an event subscription at `…/events` (the one of the last enrolment, or one with that
/// URL, is moved there rather than a second one made), and both secrets, sealed.
/// Answers what was enrolled, without secrets.
pub async fn enroll(
    store: &Store,
    master: &MasterKey,
    catalog: &Catalog,
    keys: &ProviderKeys,
    code: &str,
    public_url: &str,
) -> anyhow::Result<Value> {
    let settings = lithic_settings(catalog, code)?;
    let lithic = client(code, settings, keys)?;
    let (public_url, asa_url, events_url) = endpoints(public_url, code)?;

    // One ASA responder per program: kept when it is ours already, replaced otherwise.
    let current = lithic
        .get(
            "asa_status",
            "/v1/responder_endpoints?type=AUTH_STREAM_ACCESS",
        )
        .await
        .context("reading the ASA responder")?;
    let enrolled_here = current.get("enrolled").and_then(Value::as_bool) == Some(true);
    if !enrolled_here || current.get("url").and_then(Value::as_str) != Some(asa_url.as_str()) {
        if enrolled_here {
            lithic
                .call(
                    "disenroll_asa",
                    Method::DELETE,
                    "/v1/responder_endpoints?type=AUTH_STREAM_ACCESS",
                    None,
                    None,
                    Retry::Transient,
                )
                .await
                .context("replacing the ASA responder")?;
        }
        let enrolled = lithic
            .call(
                "enroll_asa",
                Method::POST,
                "/v1/responder_endpoints",
                Some(&json!({ "type": "AUTH_STREAM_ACCESS", "url": asa_url })),
                None,
                Retry::Transient,
            )
            .await
            .context("registering the ASA responder")?;
        if enrolled.get("enrolled").and_then(Value::as_bool) != Some(true) {
            bail!("Lithic did not enroll the ASA responder: {enrolled}");
        }
    }
    let asa_secret = secret_of(
        &lithic
            .get("asa_secret", "/v1/auth_stream/secret")
            .await
            .context("reading the ASA secret")?,
        "ASA",
    )?;

    let existing = lithic
        .get(
            "list_event_subscriptions",
            "/v1/event_subscriptions?page_size=100",
        )
        .await
        .context("listing event subscriptions")?;
    // Our subscription, if Lithic has it: the one recorded at the last enrolment (its
    // URL moves with a new public URL), else one at this URL.
    let recorded = {
        let mut conn = store.conn().await?;
        records::enrolment(&mut conn, code).await?
    }
    .map(|e| e.subscription_token);
    let subs = existing
        .get("data")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let token_of = |s: &Value| s.get("token").and_then(Value::as_str).map(str::to_owned);
    let found = subs
        .iter()
        .find(|s| token_of(s).is_some() && token_of(s) == recorded)
        .or_else(|| {
            subs.iter()
                .find(|s| s.get("url").and_then(Value::as_str) == Some(events_url.as_str()))
        })
        .and_then(token_of);
    let subscription_token = match found {
        Some(token) => {
            lithic
                .call(
                    "update_event_subscription",
                    Method::PATCH,
                    &format!("/v1/event_subscriptions/{}", super::path_segment(&token)),
                    Some(&json!({
                        "url": events_url,
                        "description": SUBSCRIPTION_DESCRIPTION,
                        "disabled": false,
                        "event_types": EVENT_TYPES,
                    })),
                    None,
                    Retry::Transient,
                )
                .await
                .context("updating the event subscription")?;
            token
        }
        None => {
            let created = lithic
                .call(
                    "create_event_subscription",
                    Method::POST,
                    "/v1/event_subscriptions",
                    Some(&json!({
                        "url": events_url,
                        "description": SUBSCRIPTION_DESCRIPTION,
                        "event_types": EVENT_TYPES,
                    })),
                    None,
                    // A repeated create would make a second subscription; a failed
                    // enrolment is run again by the operator and finds the first.
                    Retry::NotProcessedOnly,
                )
                .await
                .context("creating the event subscription")?;
            created
                .get("token")
                .and_then(Value::as_str)
                .context("Lithic answered no subscription token")?
                .to_owned()
        }
    };
    let events_secret = secret_of(
        &lithic
            .get(
                "event_subscription_secret",
                &format!(
                    "/v1/event_subscriptions/{}/secret",
                    super::path_segment(&subscription_token)
                ),
            )
            .await
            .context("reading the event subscription's secret")?,
        "event subscription",
    )?;

    let now = now_micros();
    let mut conn = store.conn().await?;
    records::save_enrolment(
        &mut conn,
        &records::Enrolment {
            subprovider_code: code.to_owned(),
            public_url: public_url.clone(),
            asa_url: asa_url.clone(),
            events_url: events_url.clone(),
            asa_secret_enc: master.seal(asa_secret.as_bytes()),
            subscription_token: subscription_token.clone(),
            events_secret_enc: master.seal(events_secret.as_bytes()),
            enrolled_at: now,
            updated_at: now,
        },
    )
    .await?;
    Ok(json!({
        "subprovider": code,
        "asa_url": asa_url,
        "events_url": events_url,
        "event_subscription": subscription_token,
        "event_types": EVENT_TYPES,
        "enrolled_at": to_rfc3339(now),
    }))
}

/// One JSON object per `lithic` subprovider: its configuration (never the key), what
/// is recorded as enrolled, and what Lithic says is enrolled now.
pub async fn status(
    store: &Store,
    master: &MasterKey,
    catalog: &Catalog,
    keys: &ProviderKeys,
) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    for s in catalog.subproviders() {
        let ProviderKind::Lithic(settings) = &s.kind else {
            continue;
        };
        let recorded = {
            let mut conn = store.conn().await?;
            records::enrolment(&mut conn, &s.code).await?
        };
        let mut v = json!({
            "subprovider": s.code,
            "kind": "lithic",
            "base_url": settings.base_url,
            "api_key_env": settings.api_key_env,
            "api_key_set": keys.get(&s.code).is_some(),
            "asa_budget_ms": settings.asa_budget_ms,
            "enrolled": recorded.is_some(),
        });
        if let Some(e) = &recorded {
            let opens = |sealed: &str| master.open(sealed).is_some();
            v["asa_url"] = json!(e.asa_url);
            v["events_url"] = json!(e.events_url);
            v["event_subscription"] = json!(e.subscription_token);
            v["secrets_readable"] = json!(opens(&e.asa_secret_enc) && opens(&e.events_secret_enc));
            v["enrolled_at"] = json!(to_rfc3339(e.enrolled_at));
        }
        if keys.get(&s.code).is_some() {
            let lithic = client(&s.code, settings, keys)?;
            v["lithic"] = match lithic
                .get(
                    "asa_status",
                    "/v1/responder_endpoints?type=AUTH_STREAM_ACCESS",
                )
                .await
            {
                Ok(asa) => json!({
                    "reachable": true,
                    "asa_enrolled": asa.get("enrolled").cloned().unwrap_or(Value::Null),
                    "asa_url": asa.get("url").cloned().unwrap_or(Value::Null),
                    "asa_url_matches": recorded.as_ref().map(|e| {
                        asa.get("url").and_then(Value::as_str) == Some(e.asa_url.as_str())
                    }),
                }),
                Err(e) => json!({ "reachable": false, "error": e.to_string() }),
            };
        }
        out.push(v);
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_under_the_public_url() {
        let (base, asa, events) = endpoints("https://issuing.example.com/", "lithic_us").unwrap();
        assert_eq!(base, "https://issuing.example.com");
        assert_eq!(
            asa,
            "https://issuing.example.com/provider/lithic/lithic_us/asa"
        );
        assert_eq!(
            events,
            "https://issuing.example.com/provider/lithic/lithic_us/events"
        );
        for bad in [
            "issuing.example.com",
            "ftp://x",
            "https://x/?a=b",
            "https://u:p@x",
        ] {
            assert!(endpoints(bad, "c").is_err(), "{bad}");
        }
    }
}
