//! Lithic's OpenAPI document (`tests/data/lithic-openapi.yml`, published by Lithic,
//! commit 225e0708) as a validator: every request our server sends the fake Lithic,
//! every answer the fake gives, every webhook it sends and every answer our server gives
//! to one is checked against the document's JSON Schemas (draft 2020-12, formats on).
//! A mismatch is a test failure.

use jsonschema::Validator;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

pub struct Spec {
    doc: Value,
    validators: Mutex<HashMap<String, Arc<Validator>>>,
}

/// A JSON pointer token: `~` and `/` escaped.
fn token(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

impl Spec {
    pub fn get() -> &'static Spec {
        static SPEC: OnceLock<Spec> = OnceLock::new();
        SPEC.get_or_init(|| {
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/lithic-openapi.yml");
            let text = std::fs::read_to_string(path).expect("read the Lithic OpenAPI document");
            let doc: Value =
                serde_yaml::from_str(&text).expect("parse the Lithic OpenAPI document");
            Spec {
                doc,
                validators: Mutex::new(HashMap::new()),
            }
        })
    }

    fn at(&self, pointer: &str) -> Option<&Value> {
        self.doc.pointer(pointer.trim_start_matches('#'))
    }

    /// Follows a `$ref` (to `#/components/...`) once.
    fn resolve<'a>(&'a self, v: &'a Value) -> &'a Value {
        match v.get("$ref").and_then(Value::as_str) {
            Some(r) => self.at(r).unwrap_or(v),
            None => v,
        }
    }

    /// The schema at `pointer`, compiled once: the whole document with a root `$ref`,
    /// so every `#/components/...` reference in it resolves.
    fn validator(&self, pointer: &str) -> Arc<Validator> {
        let mut cache = self
            .validators
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(v) = cache.get(pointer) {
            return v.clone();
        }
        let mut schema = self.doc.clone();
        // A URI fragment: braces of path templates are percent-encoded.
        schema["$ref"] = json!(pointer.replace('{', "%7B").replace('}', "%7D"));
        let v = Arc::new(
            jsonschema::options()
                .with_draft(jsonschema::Draft::Draft202012)
                .should_validate_formats(true)
                .build(&schema)
                .unwrap_or_else(|e| panic!("schema {pointer}: {e}")),
        );
        cache.insert(pointer.to_owned(), v.clone());
        v
    }

    /// Problems of `instance` against the schema at `pointer`, each with its place.
    pub fn check(&self, pointer: &str, instance: &Value, what: &str) -> Vec<String> {
        let v = self.validator(pointer);
        v.iter_errors(instance)
            .take(20)
            .map(|e| format!("{what}: {e} (at {})", e.instance_path()))
            .collect()
    }

    /// The path template of the document that `path` (no query) matches: the one with
    /// the most literal segments, so `/v1/cards/aggregate_balances` beats
    /// `/v1/cards/{card_token}`.
    pub fn template(&self, path: &str) -> Option<String> {
        let segs: Vec<&str> = path.split('/').collect();
        let paths = self.doc.get("paths")?.as_object()?;
        paths
            .keys()
            .filter_map(|t| {
                let tsegs: Vec<&str> = t.split('/').collect();
                if tsegs.len() != segs.len() {
                    return None;
                }
                let mut literal = 0;
                for (a, b) in tsegs.iter().zip(&segs) {
                    if a.starts_with('{') && a.ends_with('}') {
                        if b.is_empty() {
                            return None;
                        }
                    } else if a == b {
                        literal += 1;
                    } else {
                        return None;
                    }
                }
                Some((literal, t.clone()))
            })
            .max_by_key(|(literal, _)| *literal)
            .map(|(_, t)| t)
    }

    fn operation_pointer(template: &str, method: &str) -> String {
        format!(
            "#/paths/{}/{}",
            token(template),
            method.to_ascii_lowercase()
        )
    }

    /// A request our server sent: operation known, parameters declared and well
    /// formed, body as the operation's schema says.
    pub fn check_request(
        &self,
        method: &str,
        template: &str,
        query: &[(String, String)],
        headers: &axum::http::HeaderMap,
        body: Option<&Value>,
    ) -> Vec<String> {
        let what = format!("request {method} {template}");
        let op_ptr = Self::operation_pointer(template, method);
        let Some(op) = self.at(&op_ptr) else {
            return vec![format!("{what}: no such operation in Lithic's API")];
        };
        let mut problems = Vec::new();
        let mut params: Vec<&Value> = Vec::new();
        for list in [
            op.get("parameters"),
            self.at(&format!("#/paths/{}/parameters", token(template))),
        ]
        .into_iter()
        .flatten()
        {
            params.extend(
                list.as_array()
                    .into_iter()
                    .flatten()
                    .map(|p| self.resolve(p)),
            );
        }
        for (name, value) in query {
            let declared = params.iter().find(|p| {
                p.get("in").and_then(Value::as_str) == Some("query")
                    && p.get("name").and_then(Value::as_str) == Some(name)
            });
            let Some(p) = declared else {
                problems.push(format!("{what}: query parameter {name} is not declared"));
                continue;
            };
            let schema = p.get("schema").cloned().unwrap_or(json!({}));
            let typed = match schema.get("type").and_then(Value::as_str) {
                Some("integer") => value
                    .parse::<i64>()
                    .map(Value::from)
                    .unwrap_or(json!(value)),
                Some("boolean") => value
                    .parse::<bool>()
                    .map(Value::from)
                    .unwrap_or(json!(value)),
                // `style: form, explode: false`: the items joined by commas.
                Some("array") if p.get("explode") == Some(&json!(false)) => {
                    json!(value.split(',').collect::<Vec<_>>())
                }
                _ => json!(value),
            };
            problems.extend(self.check_inline(&schema, &typed, &format!("{what} ?{name}")));
        }
        for p in &params {
            let name = p.get("name").and_then(Value::as_str).unwrap_or_default();
            let required = p.get("required").and_then(Value::as_bool) == Some(true);
            match p.get("in").and_then(Value::as_str) {
                Some("query") if required && !query.iter().any(|(n, _)| n == name) => problems
                    .push(format!(
                        "{what}: required query parameter {name} is missing"
                    )),
                Some("header") => {
                    if let Some(v) = headers.get(name).and_then(|v| v.to_str().ok()) {
                        let schema = p.get("schema").cloned().unwrap_or(json!({}));
                        problems.extend(self.check_inline(
                            &schema,
                            &json!(v),
                            &format!("{what} header {name}"),
                        ));
                    } else if required {
                        problems.push(format!("{what}: required header {name} is missing"));
                    }
                }
                _ => {}
            }
        }
        if headers.get("idempotency-key").is_some()
            && !params
                .iter()
                .any(|p| p.get("name").and_then(Value::as_str) == Some("Idempotency-Key"))
        {
            problems.push(format!(
                "{what}: Idempotency-Key is not a parameter of this operation"
            ));
        }
        let body_ptr = format!("{op_ptr}/requestBody/content/application~1json/schema");
        match (self.at(&body_ptr), body) {
            (Some(_), Some(b)) => problems.extend(self.check(&body_ptr, b, &what)),
            (Some(_), None) => {
                if op.pointer("/requestBody/required") == Some(&json!(true)) {
                    problems.push(format!("{what}: the request body is required"));
                }
            }
            (None, Some(_)) => problems.push(format!("{what}: the operation takes no body")),
            (None, None) => {}
        }
        problems
    }

    /// A schema given inline (a parameter's): compiled against the document too.
    fn check_inline(&self, schema: &Value, instance: &Value, what: &str) -> Vec<String> {
        if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
            return self.check(r, instance, what);
        }
        let v = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .should_validate_formats(true)
            .build(schema)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        v.iter_errors(instance)
            .map(|e| format!("{what}: {e}"))
            .collect()
    }

    /// An answer the fake gives: its status is declared for the operation (5xx, which
    /// Lithic never declares, may be injected) and its body matches.
    pub fn check_response(
        &self,
        method: &str,
        template: &str,
        status: u16,
        body: Option<&Value>,
    ) -> Vec<String> {
        let what = format!("answer {status} to {method} {template}");
        let op_ptr = Self::operation_pointer(template, method);
        let code = status.to_string();
        let ptr = format!("{op_ptr}/responses/{}", token(&code));
        let Some(resp) = self.at(&ptr) else {
            if status >= 500 {
                return body
                    .map(|b| self.check("#/components/schemas/error", b, &what))
                    .unwrap_or_default();
            }
            return vec![format!("{what}: status not declared for the operation")];
        };
        let schema_ptr = match resp.get("$ref").and_then(Value::as_str) {
            Some(r) => format!("{r}/content/application~1json/schema"),
            None => format!("{ptr}/content/application~1json/schema"),
        };
        match (self.at(&schema_ptr), body) {
            (Some(_), Some(b)) => self.check(&schema_ptr, b, &what),
            (Some(_), None) => vec![format!("{what}: the answer needs a body")],
            (None, _) => Vec::new(),
        }
    }

    /// A webhook the fake sends (`card_authorization.approval_request`,
    /// `card_transaction.updated`, …).
    pub fn check_webhook(&self, name: &str, body: &Value) -> Vec<String> {
        let ptr = format!(
            "#/webhooks/{}/post/requestBody/content/application~1json/schema",
            token(name)
        );
        if self.at(&ptr).is_none() {
            return vec![format!("webhook {name} is not in Lithic's API")];
        }
        self.check(&ptr, body, &format!("webhook {name}"))
    }

    /// Our server's answer to a webhook: a declared status, and the declared body.
    pub fn check_webhook_response(
        &self,
        name: &str,
        status: u16,
        body: Option<&Value>,
    ) -> Vec<String> {
        let what = format!("our answer {status} to webhook {name}");
        let ptr = format!("#/webhooks/{}/post/responses/{status}", token(name));
        let Some(resp) = self.at(&ptr) else {
            // 5XX tells Lithic to retry; other statuses are not declared.
            let retry = format!("#/webhooks/{}/post/responses/5XX", token(name));
            if status >= 500 && self.at(&retry).is_some() {
                return Vec::new();
            }
            return vec![format!("{what}: status not declared")];
        };
        let schema_ptr = format!("{ptr}/content/application~1json/schema");
        match (resp.get("content"), body) {
            (Some(_), Some(b)) => self.check(&schema_ptr, b, &what),
            (Some(_), None) => vec![format!("{what}: the answer needs a JSON body")],
            (None, _) => Vec::new(),
        }
    }
}
