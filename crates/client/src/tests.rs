use super::*;
use serde_json::json;
use std::collections::HashSet;

const SECRET: &str = "sk_test_secret";
const API_KEY: &str = "pk_test";

fn client() -> Client {
    Client::new("http://127.0.0.1:9", API_KEY, SECRET).unwrap()
}

fn key() -> Key {
    Key::from_secret(SECRET)
}

fn sealed_body(key: &Key, plaintext: &Value) -> Vec<u8> {
    json!({ "encrypted": issuing_envelope::seal(key, plaintext.to_string().as_bytes()) })
        .to_string()
        .into_bytes()
}

/// Opens a request body the way the server does.
fn open_request(body: &str) -> Value {
    let outer: Value = serde_json::from_str(body).unwrap();
    let plain = issuing_envelope::open(&key(), outer["encrypted"].as_str().unwrap()).unwrap();
    serde_json::from_slice(&plain).unwrap()
}

#[test]
fn request_round_trip_adds_timestamp_and_keeps_fields_at_root() {
    let c = client();
    let before = now_micros();
    let body = c
        .seal_request(json!({"card_id": "c1", "external_user_id": "u1"}))
        .unwrap();
    let plain = open_request(&body);
    assert_eq!(plain["card_id"], "c1");
    assert_eq!(plain["external_user_id"], "u1");
    let ts = plain["request_timestamp"].as_i64().unwrap();
    assert!(ts >= before && ts <= now_micros() + 1_000, "{ts}");
    assert_eq!(plain.as_object().unwrap().len(), 3);
}

#[test]
fn request_keeps_a_given_timestamp_and_accepts_null() {
    let c = client();
    let plain = open_request(&c.seal_request(json!({"request_timestamp": 42})).unwrap());
    assert_eq!(plain, json!({"request_timestamp": 42}));
    let plain = open_request(&c.seal_request(Value::Null).unwrap());
    assert!(plain["request_timestamp"].is_i64());
    assert!(matches!(
        c.seal_request(json!([1, 2])),
        Err(ClientError::Config(_))
    ));
}

#[test]
fn request_is_sealed_with_a_fresh_nonce() {
    let c = client();
    let a = c.seal_request(json!({"request_timestamp": 1})).unwrap();
    let b = c.seal_request(json!({"request_timestamp": 1})).unwrap();
    assert_ne!(a, b);
    assert_eq!(open_request(&a), open_request(&b));
}

#[test]
fn timestamps_are_strictly_increasing_across_threads() {
    let start = now_micros();
    let handles: Vec<_> = (0..8)
        .map(|_| {
            std::thread::spawn(|| {
                let mut seen = Vec::with_capacity(5_000);
                for _ in 0..5_000 {
                    seen.push(next_request_timestamp());
                }
                seen
            })
        })
        .collect();
    let mut all = HashSet::new();
    for h in handles {
        let seen = h.join().unwrap();
        assert!(
            seen.windows(2).all(|w| w[0] < w[1]),
            "increasing per thread"
        );
        for ts in seen {
            assert!(all.insert(ts), "duplicate timestamp {ts}");
        }
    }
    assert_eq!(all.len(), 40_000);
    // Close to the clock: 40,000 calls can run ahead by at most 40,000 µs.
    let max = *all.iter().max().unwrap();
    assert!(all.iter().all(|&ts| ts >= start));
    assert!(max <= now_micros() + 40_000, "{max}");
}

#[test]
fn success_response_is_opened() {
    let c = client();
    let body = sealed_body(&key(), &json!({"success": true, "available": "1.00"}));
    let v = c.interpret_response("project/balance", 200, &body).unwrap();
    assert_eq!(v, json!({"success": true, "available": "1.00"}));
}

#[test]
fn sealed_error_is_an_api_error() {
    let c = client();
    let body = sealed_body(
        &key(),
        &json!({"success": false, "error": "Card not found", "error_slug": "card_not_found"}),
    );
    match c.interpret_response("cards/get", 404, &body) {
        Err(ClientError::Api {
            status,
            slug,
            message,
        }) => {
            assert_eq!((status, slug.as_str()), (404, "card_not_found"));
            assert_eq!(message, "Card not found");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn plain_errors_are_api_errors() {
    let c = client();
    let body =
        br#"{"success": false, "error": "API key not found", "error_slug": "api_key_not_found"}"#;
    let e = c.interpret_response("cards/get", 401, body).unwrap_err();
    assert_eq!(e.slug(), Some("api_key_not_found"));
    assert_eq!(
        e.to_string(),
        "API key not found (api_key_not_found, HTTP 401)"
    );
    // Not in the standard shape: still an API error, with a placeholder slug.
    let e = c
        .interpret_response("cards/get", 403, br#"{"message": "nope"}"#)
        .unwrap_err();
    match e {
        ClientError::Api { slug, message, .. } => {
            assert_eq!((slug.as_str(), message.as_str()), ("unknown_error", "nope"))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn unreadable_responses_are_decode_errors() {
    let c = client();
    let cases: Vec<(u16, Vec<u8>)> = vec![
        (502, b"<html>bad gateway</html>".to_vec()),
        // A plain success is not trusted.
        (200, br#"{"success": true}"#.to_vec()),
        // Sealed with another project's key.
        (
            200,
            sealed_body(&Key::from_secret("other"), &json!({"success": true})),
        ),
        (200, br#"{"encrypted": "not base64!"}"#.to_vec()),
        (200, sealed_body(&key(), &json!([1]))),
        (500, sealed_body(&key(), &json!({"success": true}))),
        (200, sealed_body(&key(), &json!({"available": "1"}))),
    ];
    for (status, body) in cases {
        match c.interpret_response("x", status, &body) {
            Err(ClientError::Decode { status: s, .. }) => assert_eq!(s, status),
            other => panic!("{status} {}: {other:?}", String::from_utf8_lossy(&body)),
        }
    }
}

#[test]
fn webhook_round_trip() {
    let c = client();
    let event = json!({"event_type": "card.freeze", "project_id": "p", "delivery_id": "d1",
                       "data": {"card_id": "c1", "status": "frozen"}});
    let body = sealed_body(&key(), &event);
    assert_eq!(c.open_webhook(Some(API_KEY), &body).unwrap(), event);
    assert_eq!(
        c.open_webhook(Some(&format!(" {API_KEY} ")), &body)
            .unwrap(),
        event
    );
}

#[test]
fn webhook_refusals() {
    let c = client();
    let body = sealed_body(&key(), &json!({"type": "card_otp", "delivery_id": "d"}));
    assert!(matches!(
        c.open_webhook(None, &body),
        Err(ClientError::WebhookApiKey)
    ));
    assert!(matches!(
        c.open_webhook(Some("pk_other"), &body),
        Err(ClientError::WebhookApiKey)
    ));
    let bad_bodies: Vec<Vec<u8>> = vec![
        b"not json".to_vec(),
        br#"{"data": 1}"#.to_vec(),
        br#"{"encrypted": 5}"#.to_vec(),
        br#"{"encrypted": "AAAA"}"#.to_vec(),
        sealed_body(&Key::from_secret("other"), &json!({"type": "x"})),
        sealed_body(&key(), &json!("a string")),
    ];
    for b in bad_bodies {
        assert!(
            matches!(
                c.open_webhook(Some(API_KEY), &b),
                Err(ClientError::WebhookBody(_))
            ),
            "{}",
            String::from_utf8_lossy(&b)
        );
    }
}

#[test]
fn debug_hides_the_secret() {
    let shown = format!("{:?}", client());
    assert!(shown.contains(API_KEY), "{shown}");
    assert!(!shown.contains(SECRET), "{shown}");
    let key_hex: String = key()
        .as_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert!(!shown.contains(&key_hex[..8]), "{shown}");
}

#[test]
fn constructor_validates_its_input() {
    for base in ["", "ftp://x", "not a url", "http://h/?q=1", "/relative"] {
        assert!(
            matches!(Client::new(base, "k", "s"), Err(ClientError::Config(_))),
            "{base}"
        );
    }
    assert!(Client::new("http://h", " ", "s").is_err());
    assert!(Client::new("http://h", "k", "").is_err());
    assert!(Client::new("http://h", "k\nx", "s").is_err());
    let c = Client::new("https://h.example:8443/", "k", "s").unwrap();
    assert_eq!(c.base_url(), "https://h.example:8443");
    let c = Client::new("http://h/api/v2/", "k", "s").unwrap();
    assert_eq!(
        c.endpoint_url("/cards/get").unwrap(),
        "http://h/api/v2/cards/get"
    );
}

#[test]
fn paths_are_checked() {
    let c = client();
    for bad in [
        "",
        "/",
        "../admin",
        "cards//get",
        "cards/get?x=1",
        "a b",
        "cards/./get",
    ] {
        assert!(c.endpoint_url(bad).is_err(), "{bad}");
    }
    assert_eq!(
        c.endpoint_url("wh/subscribe").unwrap(),
        "http://127.0.0.1:9/api/v2/wh/subscribe"
    );
}

/// A fake API on a real socket: checks the header and envelope like the server does and
/// answers according to the path.
mod over_http {
    use super::*;
    use axum::body::Bytes;
    use axum::extract::Path;
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::post;
    use axum::Router;

    async fn fake(
        Path(path): Path<String>,
        headers: HeaderMap,
        body: Bytes,
    ) -> (StatusCode, String) {
        let plain_error = |status: StatusCode, slug: &str| {
            (
                status,
                json!({"success": false, "error": "plain", "error_slug": slug}).to_string(),
            )
        };
        if headers.get("API-KEY").and_then(|v| v.to_str().ok()) != Some(API_KEY) {
            return plain_error(StatusCode::UNAUTHORIZED, "api_key_not_found");
        }
        if headers.get("content-type").and_then(|v| v.to_str().ok()) != Some("application/json") {
            return plain_error(StatusCode::BAD_REQUEST, "bad_content_type");
        }
        let request = open_request(std::str::from_utf8(&body).unwrap());
        let seal = |status: StatusCode, v: Value| {
            (status, String::from_utf8(sealed_body(&key(), &v)).unwrap())
        };
        match path.as_str() {
            "echo" => seal(StatusCode::OK, json!({"success": true, "request": request})),
            "missing" => seal(
                StatusCode::NOT_FOUND,
                json!({"success": false, "error": "Card not found", "error_slug": "card_not_found"}),
            ),
            "garbage" => (StatusCode::BAD_GATEWAY, "upstream down".into()),
            _ => plain_error(StatusCode::NOT_FOUND, "not_found"),
        }
    }

    async fn start() -> String {
        let app = Router::new().route("/api/v2/{*path}", post(fake));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn calls_go_through_the_envelope() {
        let base = start().await;
        let c = Client::new(&base, API_KEY, SECRET).unwrap();
        let v = c.call("echo", json!({"card_id": "c9"})).await.unwrap();
        assert_eq!(v["success"], true);
        assert_eq!(v["request"]["card_id"], "c9");
        assert!(v["request"]["request_timestamp"].is_i64());

        let e = c.call("missing", json!({})).await.unwrap_err();
        assert!(
            matches!(&e, ClientError::Api { status: 404, slug, .. } if slug == "card_not_found"),
            "{e:?}"
        );
        let e = c.call("garbage", json!({})).await.unwrap_err();
        assert!(
            matches!(e, ClientError::Decode { status: 502, .. }),
            "{e:?}"
        );

        let wrong_key = Client::new(&base, "pk_other", SECRET).unwrap();
        let e = wrong_key.call("echo", json!({})).await.unwrap_err();
        assert_eq!(e.slug(), Some("api_key_not_found"));
    }

    #[tokio::test]
    async fn unreachable_server_is_a_transport_error() {
        // Bind and drop a listener to get a port nothing listens on.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let c = Client::new(&format!("http://{addr}"), API_KEY, SECRET).unwrap();
        let e = c.call("echo", json!({})).await.unwrap_err();
        assert!(matches!(e, ClientError::Transport { .. }), "{e:?}");
        assert!(e.to_string().starts_with("echo: request failed"), "{e}");
    }
}
