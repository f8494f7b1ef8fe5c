//! The Lithic routes never answer 5xx to a correctly signed message that is bad (issue
//! 43, item 0: fuzzing found 500s for long tokens, huge amounts and NULs). Each bad
//! message is signed exactly as Lithic signs and sent to the real server: an ASA
//! request is declined with a 200 `asa-response` (checked against Lithic's document by
//! the fake), an event delivery is acknowledged with a 200 and `"applied": false`, and
//! nothing is applied: the card's funds, its transactions, our webhook events and the
//! master balance are as they were, and the ledger verifies. A property test then
//! sends random mutations of a valid ASA request and of a valid delivery and expects
//! no 5xx.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::lithic::bodies::{self, uuid};
use common::lithic::harness::{usdt, Lithic};
use common::lithic::Merchant;
use common::Backend;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::{json, Value};

macro_rules! inbound_case {
    ($name:ident) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                if let Some(l) = Lithic::start(Backend::Sqlite, "").await {
                    super::$name(&l).await;
                    l.finish().await;
                }
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                if let Some(l) = Lithic::start(Backend::Postgres, "").await {
                    super::$name(&l).await;
                    l.finish().await;
                }
            }
        }
    };
}

/// What a message could change: the card's (available, pending), its transactions,
/// the project's webhook events and its master balance.
#[derive(Debug, PartialEq)]
struct Books {
    funds: (String, String),
    txs: usize,
    events: usize,
    master: String,
}

async fn books(l: &Lithic, card_id: &str) -> Books {
    let events = {
        let mut conn = l.t.store.conn().await.unwrap();
        issuing_store::events::list_for_project(&mut conn, &l.t.creds.project_id, 100_000)
            .await
            .unwrap()
            .len()
    };
    let master = l.t.ok("project/balance", json!({})).await["available"]
        .as_str()
        .unwrap()
        .to_owned();
    Books {
        funds: l.balance("ada", card_id).await,
        txs: l.txs("ada", card_id).await.len(),
        events,
        master,
    }
}

/// A card with an approved authorization of 10.00 still held: (card id, Lithic's card,
/// the authorization's transaction token).
async fn card_with_a_hold(l: &Lithic) -> (String, Value, String) {
    let (card_id, token) = l.card("ada", "50").await;
    let asa = l.fake.authorize(&token, 1000, &Merchant::coffee()).await;
    assert_eq!(
        (asa.status, asa.result()),
        (200, "APPROVED"),
        "{:?}",
        asa.answer
    );
    (card_id, l.fake.card(&token).unwrap(), asa.token)
}

/// A valid ASA request for `card` (a fresh token).
fn asa_body(card: &Value) -> Value {
    bodies::asa_request(&uuid(), "AUTHORIZATION", card, 700, &Merchant::coffee())
}

/// A valid delivery of the transaction `tx` with its clearing (of 10.00).
fn delivery(card: &Value, tx: &str) -> Value {
    let events = [
        bodies::event("AUTHORIZATION", 1000, "APPROVED", "DEBIT"),
        bodies::event("CLEARING", 1000, "APPROVED", "DEBIT"),
    ];
    let mut body = bodies::transaction(
        tx,
        card,
        &Merchant::coffee(),
        "SETTLED",
        "APPROVED",
        &events,
    );
    body["event_type"] = json!("card_transaction.updated");
    body
}

/// `body` with the value at `pointer` replaced (or removed when `value` is None).
fn with(body: &Value, pointer: &str, value: Option<Value>) -> Value {
    let mut b = body.clone();
    match value {
        Some(v) => {
            *b.pointer_mut(pointer)
                .unwrap_or_else(|| panic!("{pointer}")) = v
        }
        None => {
            let (parent, key) = pointer.rsplit_once('/').unwrap();
            b.pointer_mut(parent)
                .and_then(Value::as_object_mut)
                .unwrap()
                .remove(key);
        }
    }
    b
}

/// Bad values for a text field that holds `good`: every control character in it, too
/// long, empty, and not a string.
fn bad_texts(good: &str) -> Vec<Value> {
    let mut bad: Vec<Value> = (0u32..0x20)
        .chain([0x7f, 0x85, 0x9f])
        .map(|c| {
            let c = char::from_u32(c).unwrap();
            // In the middle, keeping the length (a token's 36 characters).
            let mid = good.len() / 2;
            json!(format!("{}{c}{}", &good[..mid], &good[mid + 1..]))
        })
        .collect();
    bad.push(json!(format!("{good}\u{0}")));
    bad.push(json!("a".repeat(245)));
    bad.push(json!("a".repeat(5000)));
    bad.push(json!(""));
    bad.push(json!(12));
    bad.push(json!(["x"]));
    bad
}

/// Bad cents: at and above where micro-units overflow, beyond our bound, not whole
/// numbers, not numbers.
fn bad_cents() -> Vec<Value> {
    let mut bad: Vec<Value> = [
        "922337203685477",
        "922337203685478",
        "922337203685479",
        "9223372036854775807",
        "-9223372036854775808",
        "18446744073709551615",
        "100000000000001",
        "-100000000000001",
        "12.5",
        "1e3",
        "-0.0",
        "99999999999999999999999999999999",
    ]
    .iter()
    .map(|t| serde_json::from_str::<Value>(t).unwrap())
    .collect();
    bad.extend([
        json!("1250"),
        json!(null),
        json!(true),
        json!({"amount": 1}),
    ]);
    bad
}

inbound_case!(bad_asa_requests_are_declined_and_change_nothing);
async fn bad_asa_requests_are_declined_and_change_nothing(l: &Lithic) {
    let (card_id, card, _) = card_with_a_hold(l).await;
    let before = books(l, &card_id).await;
    assert_eq!(before.txs, 1);
    assert!(
        before.events > 0,
        "the authorization's webhook event counts"
    );
    let good = asa_body(&card);

    let mut cases: Vec<(String, Value)> = Vec::new();
    let card_token = card["token"].as_str().unwrap().to_owned();
    let token = good["token"].as_str().unwrap().to_owned();
    for (pointer, like) in [
        ("/token", token.as_str()),
        ("/card/token", card_token.as_str()),
        ("/merchant/mcc", "5814"),
        ("/merchant/descriptor", "COFFEE SHOP"),
        ("/merchant/country", "USA"),
        ("/amounts/merchant/currency", "USD"),
        ("/status", "AUTHORIZATION"),
    ] {
        for v in bad_texts(like) {
            // An empty descriptor, MCC or country is a merchant that says nothing, and
            // a number of 12 as a text is refused like any other type.
            if v == json!("") && pointer.starts_with("/merchant/") {
                continue;
            }
            cases.push((
                format!("{pointer} = {v:.60}"),
                with(&good, pointer, Some(v)),
            ));
        }
    }
    for v in bad_cents() {
        for pointer in ["/amounts/cardholder/amount", "/amounts/merchant/amount"] {
            // null is no merchant amount (the card's is used); not a bad value there.
            if v.is_null() && pointer == "/amounts/merchant/amount" {
                continue;
            }
            cases.push((
                format!("{pointer} = {v}"),
                with(&good, pointer, Some(v.clone())),
            ));
        }
    }
    for pointer in [
        "/token",
        "/status",
        "/card",
        "/card/token",
        "/amounts/cardholder/amount",
    ] {
        let mut b = with(&good, pointer, None);
        if pointer == "/amounts/cardholder/amount" {
            // Without amounts.cardholder the deprecated amount is read: drop it too.
            b.as_object_mut().unwrap().remove("amount");
        }
        cases.push((format!("no {pointer}"), b));
    }
    cases.push((
        "status CREDIT_ANYTHING".into(),
        with(&good, "/status", Some(json!("CREDIT_ANYTHING"))),
    ));
    cases.push((
        "merchant a list".into(),
        with(&good, "/merchant", Some(json!([1, 2]))),
    ));
    cases.push((
        "amounts a string".into(),
        with(&good, "/amounts", Some(json!("x"))),
    ));
    cases.push(("a NUL in an unused key".into(), {
        let mut b = good.clone();
        b["avs"]["zip\u{0}code"] = json!("1");
        b
    }));
    cases.push(("a huge list".into(), {
        let mut b = good.clone();
        b["rule_results"] = json!(vec![json!({"x": "\u{1}"}); 5000]);
        b
    }));

    let mut answered = 0;
    for (what, body) in &cases {
        let (status, answer) = l.fake.asa_raw(&body.to_string()).await;
        assert_eq!(status, 200, "{what}: {answer:?}");
        let answer = answer.unwrap_or(Value::Null);
        assert_eq!(
            answer["result"], "UNAUTHORIZED_MERCHANT",
            "{what}: {answer}"
        );
        answered += 1;
    }
    // Not JSON, and JSON that is not an object.
    for text in ["{", "[]", "null", "\"x\"", "{\"token\": 1,}"] {
        let (status, answer) = l.fake.asa_raw(text).await;
        assert_eq!(status, 200, "{text}: {answer:?}");
        assert_eq!(answer.unwrap()["result"], "UNAUTHORIZED_MERCHANT", "{text}");
        answered += 1;
    }
    // The token is echoed when it is one, so Lithic can match the answer.
    let (_, answer) = l
        .fake
        .asa_raw(
            &with(
                &good,
                "/amounts/cardholder/amount",
                Some(json!(922_337_203_685_478_i64)),
            )
            .to_string(),
        )
        .await;
    assert_eq!(answer.unwrap()["token"], good["token"]);
    assert!(answered > 150, "{answered} cases");

    assert_eq!(books(l, &card_id).await, before, "nothing was applied");
    // The valid request still decides: the server is unharmed, and it holds.
    let (status, answer) = l.fake.asa_raw(&good.to_string()).await;
    assert_eq!(
        (status, answer.unwrap()["result"].clone()),
        (200, json!("APPROVED"))
    );
    assert_eq!(books(l, &card_id).await.txs, 2);
}

inbound_case!(bad_event_deliveries_are_acknowledged_and_change_nothing);
async fn bad_event_deliveries_are_acknowledged_and_change_nothing(l: &Lithic) {
    let (card_id, card, tx) = card_with_a_hold(l).await;
    let before = books(l, &card_id).await;
    assert!(
        before.events > 0,
        "the authorization's webhook event counts"
    );
    let good = delivery(&card, &tx);
    // events[1] is the clearing; a bad one must not clear, nor post anything.
    let event_token = good["events"][1]["token"].as_str().unwrap().to_owned();
    let card_token = card["token"].as_str().unwrap().to_owned();

    let mut cases: Vec<(String, Value)> = Vec::new();
    for (pointer, like) in [
        ("/token", tx.as_str()),
        ("/card_token", card_token.as_str()),
        ("/events/1/token", event_token.as_str()),
        ("/events/1/type", "CLEARING"),
        ("/events/1/result", "APPROVED"),
        ("/events/1/amounts/merchant/currency", "USD"),
        ("/merchant/mcc", "5814"),
        ("/merchant/descriptor", "COFFEE SHOP"),
    ] {
        for v in bad_texts(like) {
            if v == json!("") && (pointer.starts_with("/merchant/") || pointer.ends_with("/result"))
            {
                continue;
            }
            cases.push((
                format!("{pointer} = {v:.60}"),
                with(&good, pointer, Some(v)),
            ));
        }
    }
    for v in bad_cents() {
        for pointer in [
            "/events/1/amounts/cardholder/amount",
            "/events/1/amounts/merchant/amount",
        ] {
            if v.is_null() && pointer == "/events/1/amounts/merchant/amount" {
                continue;
            }
            cases.push((
                format!("{pointer} = {v}"),
                with(&good, pointer, Some(v.clone())),
            ));
        }
    }
    for pointer in ["/token", "/card_token", "/events/1/token", "/events/1/type"] {
        cases.push((format!("no {pointer}"), with(&good, pointer, None)));
    }
    cases.push((
        "events not a list".into(),
        with(&good, "/events", Some(json!({"a": 1}))),
    ));
    cases.push((
        "an event not an object".into(),
        with(&good, "/events/1", Some(json!("x"))),
    ));
    cases.push(("1001 events".into(), {
        let many: Vec<Value> = (0..1001)
            .map(|_| json!({"token": uuid(), "type": "CLEARING", "amount": 1}))
            .collect();
        with(&good, "/events", Some(json!(many)))
    }));
    cases.push((
        "a NUL in an unused field".into(),
        with(&good, "/pos/terminal/operator", Some(json!("\u{0}"))),
    ));
    for (what, body) in &cases {
        let answers = l
            .fake
            .event_raw("card_transaction.updated", &body.to_string())
            .await;
        assert!(!answers.is_empty());
        for (status, answer) in answers {
            assert_eq!(status, 200, "{what}: {answer:?}");
            let answer = answer.unwrap_or(Value::Null);
            assert_eq!(answer["applied"], false, "{what}: {answer}");
        }
    }
    for text in ["{", "[]", "null"] {
        for (status, answer) in l.fake.event_raw("card_transaction.updated", text).await {
            assert_eq!(
                (status, answer.unwrap()["applied"].clone()),
                (200, json!(false)),
                "{text}"
            );
        }
    }
    // The other event types we read.
    let holder = json!({"event_type": "account_holder.verification", "token": "h\u{0}", "status": "ACCEPTED"});
    let embed = json!({"event_type": "embed.viewed", "card_token": "a".repeat(245)});
    for (kind, body) in [
        ("account_holder.verification", holder),
        ("embed.viewed", embed),
    ] {
        let answers = l.fake.event_raw(kind, &body.to_string()).await;
        assert!(!answers.is_empty(), "{kind} is subscribed");
        for (status, answer) in answers {
            assert_eq!(
                (status, answer.unwrap()["applied"].clone()),
                (200, json!(false)),
                "{kind}"
            );
        }
    }

    assert_eq!(books(l, &card_id).await, before, "nothing was applied");
    // The good delivery still clears the hold: nothing of it was recorded as seen.
    for (status, _) in l
        .fake
        .event_raw("card_transaction.updated", &good.to_string())
        .await
    {
        assert_eq!(status, 200);
    }
    let after = books(l, &card_id).await;
    assert_eq!(after.funds, (usdt("40"), usdt("0")));
}

// ---------------------------------------------------------------------------------
// Property test: random mutations of a valid ASA request and of a valid delivery.

/// Values a fuzzer would try.
fn wild() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        prop::sample::select(vec![
            0i64,
            -1,
            1,
            922_337_203_685_477,
            922_337_203_685_478,
            100_000_000_000_000,
            100_000_000_000_001,
            i64::MAX,
            i64::MIN,
        ])
        .prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        Just(json!(u64::MAX)),
        "[\\x00-\\x1f\\x7f a-zA-Z0-9-]{0,40}".prop_map(Value::from),
        "\\PC{0,300}".prop_map(Value::from),
        (0usize..3000).prop_map(|n| json!("a".repeat(n))),
        Just(json!(uuid())),
        Just(json!({})),
        Just(json!([])),
        (0usize..2000).prop_map(|n| json!(vec![json!(1); n])),
        Just(json!({"amount": 1, "currency": "US\u{0}"})),
    ]
}

/// The JSON pointers of every value in `v` (the root aside).
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.push(p.clone());
                pointers(x, p, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                let p = format!("{at}/{i}");
                out.push(p.clone());
                pointers(x, p, out);
            }
        }
        _ => {}
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    Replace(prop::sample::Index, Value),
    Remove(prop::sample::Index),
    /// A new key in the object at the index (or the root).
    Add(prop::sample::Index, String, Value),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        5 => (any::<prop::sample::Index>(), wild()).prop_map(|(i, v)| Mutation::Replace(i, v)),
        2 => any::<prop::sample::Index>().prop_map(Mutation::Remove),
        1 => (any::<prop::sample::Index>(), "\\PC{0,10}", wild()).prop_map(|(i, k, v)| Mutation::Add(i, k, v)),
    ]
}

fn mutate(base: &Value, mutations: &[Mutation]) -> Value {
    let mut v = base.clone();
    for m in mutations {
        let mut ps = Vec::new();
        pointers(&v, String::new(), &mut ps);
        if ps.is_empty() {
            continue;
        }
        match m {
            Mutation::Replace(i, x) => {
                if let Some(slot) = v.pointer_mut(&ps[i.index(ps.len())]) {
                    *slot = x.clone();
                }
            }
            Mutation::Remove(i) => {
                let p = ps[i.index(ps.len())].clone();
                let (parent, key) = p.rsplit_once('/').unwrap();
                match v.pointer_mut(parent) {
                    Some(Value::Object(o)) => {
                        o.remove(&key.replace("~1", "/").replace("~0", "~"));
                    }
                    Some(Value::Array(a)) => {
                        let i: usize = key.parse().unwrap();
                        a.remove(i);
                    }
                    _ => {}
                }
            }
            Mutation::Add(i, k, x) => {
                let p = ps[i.index(ps.len())].clone();
                match v.pointer_mut(&p) {
                    Some(Value::Object(o)) => {
                        o.insert(k.clone(), x.clone());
                    }
                    _ => {
                        v[k.as_str()] = x.clone();
                    }
                }
            }
        }
    }
    v
}

inbound_case!(random_signed_bodies_never_answer_5xx);
async fn random_signed_bodies_never_answer_5xx(l: &Lithic) {
    const CASES: usize = 60;
    let (_, card, tx) = card_with_a_hold(l).await;
    let asa = asa_body(&card);
    let events = delivery(&card, &tx);
    let mut runner = TestRunner::deterministic();
    let strategy = prop::collection::vec(mutation(), 1..=4);
    let mut declined = 0;
    for case in 0..CASES {
        let m = strategy.new_tree(&mut runner).unwrap().current();
        let body = mutate(&asa, &m).to_string();
        let (status, answer) = l.fake.asa_raw(&body).await;
        assert!(
            status == 200,
            "case {case}: {status} {answer:?} to {body:.2000}"
        );
        if answer.as_ref().map(|a| a["result"] != "APPROVED") == Some(true) {
            declined += 1;
        }
        let m = strategy.new_tree(&mut runner).unwrap().current();
        let body = mutate(&events, &m).to_string();
        for (status, answer) in l.fake.event_raw("card_transaction.updated", &body).await {
            assert!(
                status == 200,
                "case {case}: {status} {answer:?} to {body:.2000}"
            );
        }
    }
    // The mutations do reach the refusals (most break something the request needs).
    assert!(declined >= CASES / 10, "{declined} of {CASES} declined");
}
