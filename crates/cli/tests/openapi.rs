//! The OpenAPI document: `GET /openapi.json` serves the committed `docs/openapi.json`,
//! it has a path for every route of the router, and it is what
//! `issuing_client::openapi::document()` generates now (so a stale file fails here).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::TestServer;
use serde_json::Value;
use std::collections::BTreeSet;

/// The router's source: its `.route("...")` paths are the routes.
const ROUTES_SOURCE: &str = include_str!("../../api/src/routes/mod.rs");
/// Routes outside `/api/v2`.
const PLAIN_ROUTES: &[&str] = &["/health", "/ready", "/openapi.json", "/reports/{token}"];
/// Plain routes outside the document: HTML for a browser, not the API (CONTRACT §16).
const UNDOCUMENTED_ROUTES: &[&str] = &["/reveal/{token}"];

/// Every path the router serves, as the document names it.
fn router_paths() -> BTreeSet<String> {
    let paths: BTreeSet<String> = ROUTES_SOURCE
        .split(".route(")
        .skip(1)
        .filter_map(|rest| rest.trim_start().strip_prefix('"'))
        .map(|rest| rest.split('"').next().unwrap().to_owned())
        .filter(|p| !UNDOCUMENTED_ROUTES.contains(&p.as_str()))
        .map(|p| {
            if PLAIN_ROUTES.contains(&p.as_str()) {
                p
            } else {
                format!("/api/v2{p}")
            }
        })
        .collect();
    assert!(paths.len() > 30, "too few routes found: {paths:?}");
    paths
}

fn committed_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json")
}

#[test]
fn committed_document_is_current() {
    let generated =
        serde_json::to_string_pretty(&issuing_client::openapi::document()).unwrap() + "\n";
    let committed = std::fs::read_to_string(committed_path()).unwrap();
    assert!(
        committed == generated,
        "docs/openapi.json is stale; regenerate it with\n  \
         cargo run -p issuing-client --features openapi --example openapi > docs/openapi.json"
    );
}

#[test]
fn document_has_every_route_and_the_endpoint_table() {
    let doc = issuing_client::openapi::document();
    let documented: BTreeSet<String> = doc["paths"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(documented, router_paths());
    let table: BTreeSet<String> = issuing_client::ENDPOINTS
        .iter()
        .map(|e| format!("/api/v2/{}", e.path))
        .collect();
    let api_routes: BTreeSet<String> = router_paths()
        .into_iter()
        .filter(|p| p.starts_with("/api/v2/"))
        .collect();
    assert_eq!(table, api_routes);
}

both_backends!(served_at_get_openapi_json, |t: TestServer| async move {
    let response = t
        .http
        .get(format!("{}/openapi.json", t.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("application/json"),
        "{content_type}"
    );
    let served: Value = response.json().await.unwrap();
    assert!(served["openapi"].as_str().unwrap().starts_with("3.1"));
    let committed: Value =
        serde_json::from_str(&std::fs::read_to_string(committed_path()).unwrap()).unwrap();
    assert_eq!(served, committed);
    let served_paths: BTreeSet<String> = served["paths"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(served_paths, router_paths());

    // Every endpoint of the table exists on the server (sandbox mode: simulate/* too).
    for endpoint in issuing_client::ENDPOINTS {
        let (status, body) = t.call(endpoint.path, serde_json::json!({})).await;
        assert!(
            !(status == 404 && body["error_slug"] == "not_found"),
            "{}: {status} {body}",
            endpoint.path
        );
    }
    let (status, body) = t.call("no/such/endpoint", serde_json::json!({})).await;
    assert_eq!(
        (status, body["error_slug"].as_str()),
        (404, Some("not_found"))
    );
});
