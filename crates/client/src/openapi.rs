//! The OpenAPI 3.1 document of the plaintext API (feature `openapi`): the JSON inside
//! the envelope, as `issuing proxy` exposes it. Generated from the endpoint table
//! ([`crate::ENDPOINTS`]), the models of [`crate::types`] (`issuing_wire::api`, the types
//! the server itself parses and serialises) and the error slugs of
//! [`issuing_wire::ErrorSlug::ALL`], so it cannot drift from them. The committed copy is
//! `docs/openapi.json`:
//!
//! ```sh
//! cargo run -p issuing-client --features openapi --example openapi > docs/openapi.json
//! ```

use crate::endpoints::{endpoint_schemas, Endpoint};
use issuing_wire::ErrorSlug;
use schemars::generate::{Contract, SchemaSettings};
use schemars::SchemaGenerator;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Where the schemas live in the document.
const SCHEMAS: &str = "#/components/schemas/";

/// Slugs the proxy answers itself, with their statuses (not in the server's list).
const PROXY_SLUGS: &[(&str, u16)] = &[("proxy_upstream_error", 502), ("proxy_busy", 503)];

const DESCRIPTION: &str = "\
The plaintext form of the issuing API (`/api/v2`): the JSON objects inside the envelope, \
as `issuing proxy` exposes them. Reference: `docs/api.md`.

**Envelope and authentication (the server itself).** Every endpoint is `POST \
/api/v2/<path>` with the header `API-KEY: pk_...` and the body `{\"encrypted\": \
base64(0x02 ‖ nonce ‖ XSalsa20-Poly1305(json))}`, sealed with the key \
`SHA-256(api_secret)`. The sealed JSON object holds the endpoint's fields described here \
at its root plus `request_timestamp` (integer microseconds since the epoch, within 30 s of \
the server clock, unique per key and path). Answers that passed authentication come back \
sealed the same way; authentication and envelope errors come back as plain JSON. \
Success bodies are `{\"success\": true, ...fields}`, errors `{\"success\": false, \
\"error\": \"<message>\", \"error_slug\": \"<slug>\"}` with the status of their slug.

**The proxy.** `issuing proxy --listen 127.0.0.1:8081` (with `ISSUING_BASE_URL`, \
`ISSUING_API_KEY`, `ISSUING_API_SECRET`) accepts the plain JSON described here, adds \
`request_timestamp` unless given, seals, forwards (with any `Idempotency-Key` header), \
opens the answer and returns it plain with the upstream status. `GET /health`, `GET \
/ready` and `GET /openapi.json` are forwarded as they are. The proxy's own refusals use \
the same error object (`proxy_upstream_error` 502, `proxy_busy` 503).

The `simulate/cards/*` endpoints exist only in sandbox mode.";

/// The OpenAPI 3.1 document (a JSON object with sorted keys).
pub fn document() -> Value {
    let settings = |contract: Contract| {
        SchemaSettings::draft2020_12().with(|s| {
            s.definitions_path = "/components/schemas".into();
            s.meta_schema = None;
            s.contract = contract;
        })
    };
    let mut requests = SchemaGenerator::new(settings(Contract::Serialize));
    let mut answers = SchemaGenerator::new(settings(Contract::Deserialize));
    let endpoints = endpoint_schemas(&mut requests, &mut answers);

    // A type whose request (serialize) schema differs from its answer (deserialize)
    // schema is listed twice: the request form gets the suffix `Request`.
    let mut schemas: BTreeMap<String, Value> = answers.take_definitions(true).into_iter().collect();
    let request_defs = requests.take_definitions(true);
    let mut renames = BTreeMap::new();
    for (name, schema) in &request_defs {
        if schemas.get(name).is_some_and(|s| s != schema) {
            renames.insert(
                format!("{SCHEMAS}{name}"),
                format!("{SCHEMAS}{name}Request"),
            );
        }
    }
    for (name, mut schema) in request_defs {
        rename_refs(&mut schema, &renames);
        let name = if renames.contains_key(&format!("{SCHEMAS}{name}")) {
            format!("{name}Request")
        } else {
            name
        };
        schemas.insert(name, schema);
    }
    schemas.insert("Success".into(), success_schema());
    schemas.insert("Error".into(), error_schema());
    schemas.insert("ErrorSlug".into(), slug_schema());

    let mut paths = Map::new();
    for (endpoint, request, answer) in endpoints {
        let mut request = Value::from(request);
        rename_refs(&mut request, &renames);
        paths.insert(
            format!("/api/v2/{}", endpoint.path),
            json!({ "post": operation(&endpoint, request, Value::from(answer)) }),
        );
    }
    paths.insert(
        "/health".into(),
        probe("Liveness probe (plain, no credentials)", "ok"),
    );
    paths.insert(
        "/ready".into(),
        probe(
            "Readiness probe: 503 not_ready while the database does not answer (plain, no credentials)",
            "ready",
        ),
    );
    paths.insert(
        "/reports/{token}".into(),
        json!({"get": {
            "operationId": "reports_download",
            "tags": ["reports"],
            "summary": "A ready report's file, from the `download_url` of reports/get (plain; \
                the token is the credential, good for one hour and any number of GETs)",
            "parameters": [{
                "name": "token", "in": "path", "required": true,
                "schema": {"type": "string", "minLength": 43, "maxLength": 43}
            }],
            "responses": {
                "200": {
                    "description": "The file, as an attachment (`Content-Disposition`)",
                    "content": {
                        "text/csv": {"schema": {"type": "string"}},
                        "application/jsonl": {"schema": {"type": "string"}}
                    }
                },
                "404": {"description": "No such link, or the report was deleted"},
                "410": {"description": "The link is over its hour: ask reports/get for another"}
            }
        }}),
    );
    paths.insert(
        "/openapi.json".into(),
        json!({"get": {
            "operationId": "openapi_json",
            "tags": ["system"],
            "summary": "This document (plain, no credentials)",
            "responses": {"200": {
                "description": "The OpenAPI document",
                "content": {"application/json": {"schema": {"type": "object"}}}
            }}
        }}),
    );

    let mut tags: Vec<&str> = crate::ENDPOINTS
        .iter()
        .map(|e| e.path.split('/').next().unwrap_or(e.path))
        .collect();
    tags.dedup();
    let tags: Vec<Value> = tags.into_iter().map(|t| json!({ "name": t })).collect();

    json!({
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "issuing API (plaintext, as served by `issuing proxy`)",
            "version": env!("CARGO_PKG_VERSION"),
            "description": DESCRIPTION,
            "license": {"name": "MIT", "identifier": "MIT"}
        },
        "servers": [
            {
                "url": "http://127.0.0.1:8081",
                "description": "`issuing proxy` (its default --listen): plain JSON in and out, it seals and opens"
            }
        ],
        "tags": tags,
        "paths": paths,
        "components": {
            "schemas": schemas,
            "responses": error_responses(),
            "parameters": {
                "IdempotencyKey": {
                    "name": "Idempotency-Key",
                    "in": "header",
                    "required": true,
                    "description": "The same key on every retry of one operation: a retry after a lost answer never runs it twice (docs/api.md, Idempotency keys).",
                    "schema": {"type": "string", "minLength": 1, "maxLength": 255}
                }
            }
        }
    })
}

/// The statuses an endpoint can answer with an error, each with its slugs.
fn statuses() -> BTreeMap<u16, Vec<&'static str>> {
    let mut by_status: BTreeMap<u16, Vec<&'static str>> = BTreeMap::new();
    for slug in ErrorSlug::ALL {
        by_status
            .entry(slug.status())
            .or_default()
            .push(slug.as_str());
    }
    for (slug, status) in PROXY_SLUGS {
        by_status.entry(*status).or_default().push(slug);
    }
    by_status
}

fn operation(endpoint: &Endpoint, request: Value, answer: Value) -> Value {
    let mut responses = Map::new();
    responses.insert(
        "200".into(),
        json!({
            "description": "Success: `success` is true and the answer's fields are at the root",
            "content": {"application/json": {"schema": {
                "allOf": [{"$ref": format!("{SCHEMAS}Success")}, answer]
            }}}
        }),
    );
    for status in statuses().keys() {
        responses.insert(
            status.to_string(),
            json!({"$ref": format!("#/components/responses/Error{status}")}),
        );
    }
    let mut description = format!(
        "`POST /api/v2/{}` (sealed on the wire; the proxy seals it).",
        endpoint.path
    );
    if endpoint.sandbox_only {
        description.push_str(" Sandbox mode only: in production the path answers `404 not_found`.");
    }
    let mut op = json!({
        "operationId": endpoint.path.replace('/', "_"),
        "tags": [endpoint.path.split('/').next().unwrap_or(endpoint.path)],
        "summary": endpoint.summary,
        "description": description,
        "requestBody": {
            "required": true,
            "content": {"application/json": {"schema": request}}
        },
        "responses": responses
    });
    if endpoint.idempotency_key {
        op["parameters"] = json!([{"$ref": "#/components/parameters/IdempotencyKey"}]);
    }
    op
}

/// `GET /health`, `GET /ready`: plain probes.
fn probe(summary: &str, status: &str) -> Value {
    let operation_id = if status == "ok" { "health" } else { "ready" };
    json!({"get": {
        "operationId": operation_id,
        "tags": ["system"],
        "summary": summary,
        "responses": {
            "200": {
                "description": "Up",
                "content": {"application/json": {"schema": {
                    "type": "object",
                    "required": ["success", "status"],
                    "properties": {
                        "success": {"const": true},
                        "status": {"const": status}
                    }
                }}}
            },
            "503": {"$ref": "#/components/responses/Error503"}
        }
    }})
}

fn success_schema() -> Value {
    json!({
        "type": "object",
        "description": "Every success body: `success` is true, the answer's fields sit beside it.",
        "required": ["success"],
        "properties": {"success": {"const": true}}
    })
}

fn error_schema() -> Value {
    json!({
        "type": "object",
        "description": "Every error body. Branch on `error_slug`; the message may change.",
        "required": ["success", "error", "error_slug"],
        "properties": {
            "success": {"const": false},
            "error": {"type": "string", "description": "A readable message"},
            "error_slug": {"$ref": format!("{SCHEMAS}ErrorSlug")}
        }
    })
}

fn slug_schema() -> Value {
    let all: Vec<String> = statuses()
        .iter()
        .flat_map(|(status, slugs)| slugs.iter().map(move |s| format!("`{s}` ({status})")))
        .collect();
    let mut slugs: Vec<&str> = ErrorSlug::ALL.iter().map(|s| s.as_str()).collect();
    slugs.extend(PROXY_SLUGS.iter().map(|(s, _)| *s));
    json!({
        "type": "string",
        "description": format!(
            "Every error slug, with the HTTP status it travels with: {}. The `proxy_*` slugs come from `issuing proxy` itself.",
            all.join(", ")
        ),
        "enum": slugs
    })
}

/// `Error400`, `Error401`, ...: the error object with the slugs of that status.
fn error_responses() -> Value {
    let mut responses = Map::new();
    for (status, slugs) in statuses() {
        let list: Vec<String> = slugs.iter().map(|s| format!("`{s}`")).collect();
        responses.insert(
            format!("Error{status}"),
            json!({
                "description": format!("An error: {}", list.join(", ")),
                "content": {"application/json": {"schema": {
                    "allOf": [
                        {"$ref": format!("{SCHEMAS}Error")},
                        {"properties": {"error_slug": {"enum": slugs}}}
                    ]
                }}}
            }),
        );
    }
    Value::Object(responses)
}

/// Points the `$ref`s named in `renames` at their new names.
fn rename_refs(value: &mut Value, renames: &BTreeMap<String, String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                match v {
                    Value::String(target) if key == "$ref" => {
                        if let Some(new) = renames.get(target.as_str()) {
                            *target = new.clone();
                        }
                    }
                    _ => rename_refs(v, renames),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rename_refs(v, renames)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `$ref` of the document resolves.
    #[test]
    fn refs_resolve() {
        fn walk(v: &Value, doc: &Value, n: &mut usize) {
            match v {
                Value::Object(map) => {
                    for (k, v) in map {
                        if let (true, Some(target)) = (k == "$ref", v.as_str()) {
                            let pointer = target.trim_start_matches('#');
                            assert!(doc.pointer(pointer).is_some(), "dangling {target}");
                            *n += 1;
                        } else {
                            walk(v, doc, n);
                        }
                    }
                }
                Value::Array(items) => items.iter().for_each(|v| walk(v, doc, n)),
                _ => {}
            }
        }
        let doc = document();
        let mut n = 0;
        walk(&doc, &doc, &mut n);
        assert!(n > 100, "{n} refs");
        assert_eq!(doc["openapi"], "3.1.0");
        for e in crate::ENDPOINTS {
            assert!(doc["paths"][format!("/api/v2/{}", e.path)]["post"].is_object());
        }
    }
}
