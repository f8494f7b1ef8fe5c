//! Reports through the public HTTP API, on both backends: rows against the API's own
//! lists, CSV quoting (RFC 4180) and JSONL, the download link (headers, any number of
//! GETs, expiry), `report.ready`, isolation between projects, retention of files, and a
//! server stopped in the middle of a build whose successor finishes it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::receiver::Receiver;
use common::TestServer;
use issuing_server::ServerConfig;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use sqlx::Row;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);
/// A merchant name that needs every kind of CSV quoting.
const AWKWARD: &str = "Bob's, \"Best\"\nShop";
/// As the API takes it (no control characters).
const AWKWARD_API: &str = "Bob's, \"Best\" Shop";

/// The window of everything this test made: the last hour to the next.
fn window() -> (String, String) {
    let now = chrono::Utc::now();
    let f = |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    (
        f(now - chrono::Duration::hours(1)),
        f(now + chrono::Duration::hours(1)),
    )
}

/// RFC 4180: records of fields, quoted fields may hold commas, doubled quotes and line
/// breaks; records end with CRLF.
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut records = Vec::new();
    let mut record = Vec::new();
    let mut field = String::new();
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        if quoted {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    chars.next();
                    field.push('"');
                } else {
                    quoted = false;
                }
            } else {
                field.push(c);
            }
            continue;
        }
        match c {
            '"' => quoted = true,
            ',' => record.push(std::mem::take(&mut field)),
            '\r' => {
                assert_eq!(chars.next(), Some('\n'), "a bare CR outside quotes");
                record.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut record));
            }
            '\n' => panic!("a bare LF outside quotes"),
            c => field.push(c),
        }
    }
    assert!(
        field.is_empty() && record.is_empty(),
        "the last record has no CRLF"
    );
    records
}

/// CSV records as objects by the header's names.
fn csv_objects(text: &str) -> Vec<serde_json::Map<String, Value>> {
    let records = parse_csv(text);
    let header = &records[0];
    records[1..]
        .iter()
        .map(|r| {
            assert_eq!(r.len(), header.len(), "{r:?}");
            header
                .iter()
                .cloned()
                .zip(r.iter().map(|v| json!(v)))
                .collect()
        })
        .collect()
}

impl TestServer {
    async fn report(&self, body: Value) -> String {
        let v = self.ok("reports/create", body).await;
        assert_eq!(v["status"], "processing", "{v}");
        v["report_id"].as_str().unwrap().to_owned()
    }

    /// Waits for a report of this server's default project to be built.
    async fn ready_report(&self, id: &str) -> Value {
        self.ready_report_on(&self.base.clone(), id).await
    }

    async fn ready_report_on(&self, base: &str, id: &str) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let (s, v) = self
                .call_on(base, &self.creds, "reports/get", json!({"report_id": id}))
                .await;
            assert_eq!(s, 200, "{v}");
            if v["status"] != "processing" {
                assert_eq!(v["status"], "ready", "{v}");
                return v;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "still processing: {v}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// GETs a download link: status, headers, body.
    async fn download(&self, url: &str) -> (u16, reqwest::header::HeaderMap, String) {
        let res = self.http.get(url).send().await.unwrap();
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        (status, headers, res.text().await.unwrap())
    }

    async fn rows_of(&self, table: &str, column: &str, value: &str) -> i64 {
        sqlx::query(&format!(
            "SELECT COUNT(*) AS n FROM {table} WHERE {column} = $1"
        ))
        .bind(value)
        .fetch_one(self.store.pool())
        .await
        .unwrap()
        .try_get::<i64, _>("n")
        .unwrap()
    }
}

both_backends!(
    card_transactions_match_the_api_list_in_csv_and_jsonl,
    |t: TestServer| async move {
        let rx = Receiver::start(&t.creds.api_secret).await;
        t.ok("wh/subscribe", json!({"url": rx.url})).await;
        let card = t.card_holding("rep-user", 100).await;
        for (amount, name) in [
            ("1.25", AWKWARD_API),
            ("2.50", "Plain Shop"),
            ("0.10", "Ünïcode, café"),
        ] {
            let a = t
                .ok(
                    "simulate/cards/auth",
                    json!({"card_id": card, "transactionAmount": amount,
                           "merchant": {"name": name, "mcc": "5999", "country": "US"}}),
                )
                .await;
            let id = a["transactionId"].as_str().unwrap().to_owned();
            if name == AWKWARD_API {
                // The API refuses control characters; a provider's name may hold a line
                // break all the same.
                sqlx::query("UPDATE card_transactions SET merchant = $1 WHERE id = $2")
                    .bind(json!({"name": AWKWARD, "mcc": "5999", "country": "US"}).to_string())
                    .bind(&id)
                    .execute(t.store.pool())
                    .await
                    .unwrap();
            }
            if amount == "2.50" {
                t.ok("simulate/cards/clear", json!({"transactionId": id}))
                    .await;
            }
        }
        let listed = t
            .ok(
                "cards/txs",
                json!({"card_id": card, "external_user_id": "rep-user", "limit": 100}),
            )
            .await;
        let listed = listed["items"].as_array().unwrap().clone();
        assert_eq!(listed.len(), 3, "{listed:?}");

        let (from, to) = window();
        let csv_id = t
            .report(json!({"type": "card_transactions", "from": from, "to": to, "format": "csv"}))
            .await;
        let jsonl_id = t
            .report(json!({"type": "card_transactions", "from": from, "to": to, "format": "jsonl"}))
            .await;
        let csv = t.ready_report(&csv_id).await;
        assert_eq!(csv["row_count"], 3, "{csv}");
        assert_eq!(csv["type"], "card_transactions");
        assert!(csv["expires_at"].is_string(), "{csv}");
        let url = csv["download_url"].as_str().unwrap();
        assert!(url.starts_with(&format!("{}/reports/", t.base)), "{url}");

        let (status, headers, body) = t.download(url).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(headers["content-type"], "text/csv; charset=utf-8");
        let disposition = headers["content-disposition"].to_str().unwrap();
        assert!(
            disposition.starts_with("attachment; filename="),
            "{disposition}"
        );
        assert!(disposition.ends_with(".csv\""), "{disposition}");
        assert_eq!(body.len() as u64, csv["size"].as_u64().unwrap());
        let digest: String = Sha256::digest(body.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(csv["sha256"], digest.as_str());
        // Any number of GETs.
        let (again, _, body2) = t.download(url).await;
        assert_eq!((again, body2.as_str()), (200, body.as_str()));

        let rows = csv_objects(&body);
        assert_eq!(rows.len(), 3);
        for item in &listed {
            let id = item["transaction_id"].as_str().unwrap();
            let row = rows
                .iter()
                .find(|r| r["transaction_id"] == id)
                .unwrap_or_else(|| panic!("{id} missing from {body}"));
            let data = &item["card_tx_data"];
            assert_eq!(row["card_id"], item["card_id"]);
            assert_eq!(row["tx_type"], item["tx_type"]);
            assert_eq!(row["type"], data["type"]);
            assert_eq!(row["status"], data["status"]);
            assert_eq!(row["auth_type"], data["auth_type"]);
            assert_eq!(row["merchant_name"], data["merchant"]["name"]);
            assert_eq!(row["card_currency"], data["card_currency"]);
            let listed_amount = data["card_amount"].as_f64().unwrap();
            let amount: f64 = row["card_amount"].as_str().unwrap().parse().unwrap();
            assert!((amount - listed_amount).abs() < 1e-9, "{row:?} {item}");
        }
        assert!(rows.iter().any(|r| r["merchant_name"] == AWKWARD), "{body}");
        assert!(body.contains("\"Bob's, \"\"Best\"\"\nShop\""), "{body}");
        // Amounts are decimal strings.
        assert!(rows.iter().any(|r| r["card_amount"] == "1.25"), "{body}");

        let jsonl = t.ready_report(&jsonl_id).await;
        let (status, headers, body) = t.download(jsonl["download_url"].as_str().unwrap()).await;
        assert_eq!(status, 200);
        assert!(headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/jsonl"));
        let lines: Vec<Value> = body
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3);
        for line in &lines {
            let row = rows
                .iter()
                .find(|r| r["transaction_id"] == line["transaction_id"])
                .unwrap();
            for (k, v) in row {
                let expected = if v == "" && line[k].is_null() {
                    &Value::Null
                } else {
                    v
                };
                assert_eq!(&line[k], expected, "{k}");
            }
        }

        rx.wait_until("report.ready twice", WAIT, |got| {
            got.iter()
                .filter(|r| r.event["event_type"] == "report.ready")
                .count()
                >= 2
        })
        .await;
        let event = rx
            .delivered()
            .into_iter()
            .find(|e| {
                e["event_type"] == "report.ready" && e["data"]["report_id"] == csv_id.as_str()
            })
            .unwrap();
        assert_eq!(
            event["data"],
            json!({"report_id": csv_id, "type": "card_transactions", "status": "ready"})
        );
    }
);

both_backends!(
    requests_are_checked_and_reports_are_the_projects_own,
    |t: TestServer| async move {
        let (from, to) = window();
        for (body, why) in [
            (
                json!({"type": "payments", "from": from, "to": to, "format": "csv"}),
                "type",
            ),
            (
                json!({"type": "cards", "from": from, "to": to, "format": "xlsx"}),
                "format",
            ),
            (
                json!({"type": "cards", "from": "yesterday", "to": to, "format": "csv"}),
                "from",
            ),
            (
                json!({"type": "cards", "from": to, "to": from, "format": "csv"}),
                "order",
            ),
            (
                json!({"type": "cards", "from": "2025-01-01T00:00:00Z",
                       "to": "2026-01-03T00:00:00Z", "format": "csv"}),
                "366 days",
            ),
        ] {
            let e = t
                .expect_error("reports/create", body, 400, "validation_error")
                .await;
            assert!(e["error"].is_string(), "{why}: {e}");
        }
        // 366 days exactly is allowed.
        t.report(json!({"type": "cards", "from": "2025-01-01T00:00:00Z",
                        "to": "2026-01-02T00:00:00Z", "format": "csv"}))
            .await;

        // Two projects, each with a card and its money.
        let other = t.new_project("other").await;
        let mine = t.card_holding("mine", 10).await;
        // The other project's money: a deposit, its own transfer and entries.
        t.deposit(&other.project_id, 5_000_000).await;
        let theirs: String = sqlx::query("SELECT id FROM transfers WHERE project_id = $1 LIMIT 1")
            .bind(&other.project_id)
            .fetch_one(t.store.pool())
            .await
            .unwrap()
            .get("id");
        for ty in ["cards", "ledger_entries", "card_transactions", "disputes"] {
            let id = t
                .report(json!({"type": ty, "from": from, "to": to, "format": "jsonl"}))
                .await;
            let r = t.ready_report(&id).await;
            let (_, _, body) = t.download(r["download_url"].as_str().unwrap()).await;
            assert!(!body.contains(&other.project_id), "{ty}: {body}");
            assert!(!body.contains(&theirs), "{ty}: {body}");
            if ty == "cards" {
                assert!(body.contains(&mine), "{body}");
            }
            if ty == "ledger_entries" {
                for line in body.lines() {
                    let v: Value = serde_json::from_str(line).unwrap();
                    let transfer = v["transfer_id"].as_str().unwrap();
                    let owner: String =
                        sqlx::query("SELECT project_id FROM transfers WHERE id = $1")
                            .bind(transfer)
                            .fetch_one(t.store.pool())
                            .await
                            .unwrap()
                            .get("project_id");
                    assert_eq!(owner, t.creds.project_id);
                    assert!(v["amount"].is_string(), "{v}");
                }
                assert!(r["row_count"].as_u64().unwrap() >= 2, "{r}");
            }
            // Another project cannot see it.
            let (s, e) = t
                .call_as(&other, "reports/get", json!({"report_id": id}))
                .await;
            assert_eq!(
                (s, e["error_slug"].as_str()),
                (404, Some("report_not_found")),
                "{e}"
            );
        }
        t.expect_error(
            "reports/get",
            json!({"report_id": "nope"}),
            404,
            "report_not_found",
        )
        .await;
    }
);

both_backends_with!(
    links_expire_and_files_are_deleted_seven_days_after_ready,
    ServerConfig {
        cleanup_interval: Duration::from_millis(300),
        ..ServerConfig::default()
    },
    |t: TestServer| async move {
        t.card_holding("kept", 0).await;
        let (from, to) = window();
        let id = t
            .report(json!({"type": "cards", "from": from, "to": to, "format": "csv"}))
            .await;
        let r = t.ready_report(&id).await;
        let url = r["download_url"].as_str().unwrap().to_owned();
        assert_eq!(t.download(&url).await.0, 200);
        // Unknown tokens are 404; HEAD and POST are 405.
        let unknown = format!("{}/reports/{}", t.base, "A".repeat(43));
        assert_eq!(t.download(&unknown).await.0, 404);
        let head = t.http.head(&url).send().await.unwrap();
        assert_eq!(head.status().as_u16(), 405);

        // An hour later the link is over (410); reports/get hands out a new one.
        sqlx::query("UPDATE report_tokens SET expires_at = $1 WHERE report_id = $2")
            .bind(common::now_micros() - 1)
            .bind(&id)
            .execute(t.store.pool())
            .await
            .unwrap();
        assert_eq!(t.download(&url).await.0, 410);
        let again = t.ready_report(&id).await;
        let fresh = again["download_url"].as_str().unwrap();
        assert_ne!(fresh, url);
        assert_eq!(t.download(fresh).await.0, 200);
        assert!(t.rows_of("report_chunks", "report_id", &id).await >= 1);

        // 8 days after it was ready the file and the report are gone.
        let eight_days = 8 * 24 * 3600 * 1_000_000_i64;
        let past = common::now_micros() - eight_days;
        sqlx::query("UPDATE reports SET ready_at = $1, expires_at = $2 WHERE id = $3")
            .bind(past)
            .bind(past + 7 * 24 * 3600 * 1_000_000_i64)
            .bind(&id)
            .execute(t.store.pool())
            .await
            .unwrap();
        let deadline = tokio::time::Instant::now() + WAIT;
        while t.rows_of("reports", "id", &id).await > 0 {
            assert!(tokio::time::Instant::now() < deadline, "never deleted");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(t.rows_of("report_chunks", "report_id", &id).await, 0);
        assert_eq!(t.rows_of("report_tokens", "report_id", &id).await, 0);
        t.expect_error(
            "reports/get",
            json!({"report_id": id}),
            404,
            "report_not_found",
        )
        .await;
        assert_eq!(t.download(fresh).await.0, 404);
    }
);

both_backends_with!(
    a_report_cut_short_by_a_restart_is_finished_by_the_next_server,
    ServerConfig {
        report_page_pause: Duration::from_millis(400),
        ..ServerConfig::default()
    },
    |mut t: TestServer| async move {
        let card = t.card_holding("many", 10).await;
        // Enough card transactions for several pages and chunks, written directly.
        let now = common::now_micros();
        let rows = 2_100;
        let mut tx = t.store.begin().await.unwrap();
        for i in 0..rows {
            let id = format!("tx-restart-{i:05}");
            issuing_store::card_txs::insert(
                &mut tx,
                &issuing_store::card_txs::CardTxRecord {
                    id,
                    project_id: t.creds.project_id.clone(),
                    card_id: card.clone(),
                    tx_kind: "auth".into(),
                    status: "declined".into(),
                    tx_type: "transaction_created_auth_declined".into(),
                    auth_amount: 1_000_000,
                    held: 0,
                    card_amount: 0,
                    cleared: 0,
                    refunded: 0,
                    original_transaction_id: None,
                    merchant: json!({"name": format!("Shop {i}, \"no\" {i}"), "mcc": "5999", "country": "US"}),
                    merchant_currency: "USD".into(),
                    merchant_amount: 1_000_000,
                    failure_reason: Some("test".into()),
                    hold_expires_at: None,
                    created_at: now - 1_000 + (i % 7),
                    updated_at: now,
                    mcc: Some("5999".into()),
                    counted_amount: 0,
                    counts: false,
                    decline: None,
                    decision_reason: None,
                    decision_state: None,
                    decision_deadline: None,
                    decision_on_timeout: None,
                    dispute_id: None,
                    settled_at: None,
                },
            )
            .await
            .unwrap();
        }
        tx.commit().await.unwrap();

        let (from, to) = window();
        let id = t
            .report(json!({"type": "card_transactions", "from": from, "to": to, "format": "csv"}))
            .await;
        // Stopped once the build has written part of the file.
        let deadline = tokio::time::Instant::now() + WAIT;
        while t.rows_of("report_chunks", "report_id", &id).await == 0 {
            assert!(tokio::time::Instant::now() < deadline, "no chunk written");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        t.stop_server().await;
        let status: String = sqlx::query("SELECT status FROM reports WHERE id = $1")
            .bind(&id)
            .fetch_one(t.store.pool())
            .await
            .unwrap()
            .get("status");
        assert_eq!(status, "processing");

        let next = t.sibling().await;
        let base = format!("http://{}", next.addr);
        let r = t.ready_report_on(&base, &id).await;
        assert_eq!(r["row_count"], rows, "{r}");
        let url = r["download_url"].as_str().unwrap();
        assert!(url.starts_with(&base), "{url}");
        let (status, _, body) = t.download(url).await;
        assert_eq!(status, 200);
        let records = csv_objects(&body);
        assert_eq!(records.len(), rows as usize);
        let mut ids: Vec<&str> = records
            .iter()
            .map(|r| r["transaction_id"].as_str().unwrap())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), rows as usize, "a row written twice");
        next.shutdown().await;
    }
);

fn console_config() -> ServerConfig {
    ServerConfig {
        console: Some(issuing_app::config::ConsoleListen {
            addr: "127.0.0.1:0".parse().unwrap(),
            optional: false,
        }),
        ..ServerConfig::default()
    }
}

both_backends_with!(
    the_console_exports_as_the_operator_audited,
    console_config(),
    |t: TestServer| async move {
        use common::console::Console;
        use issuing_console::operators::{self, Role};
        let card = t.card_holding("console-export", 10).await;
        let password = operators::create(&t.store, "ops@example.com", Role::Operator, &[])
            .await
            .unwrap()
            .password;
        let op = Console::login(t.console_addr().unwrap(), "ops@example.com", &password).await;
        let project = format!("/console/projects/{}", t.creds.project_id);

        // The project page: any type.
        let p = op
            .act(
                &project,
                &format!("{project}/export"),
                &[("type", "ledger_entries"), ("format", "csv"), ("days", "7")],
            )
            .await;
        assert_eq!(p.status, 303, "{}", p.body);
        let page = p.location().to_owned();
        let id = page.strip_prefix("/console/reports/").unwrap().to_owned();
        let r = t.ready_report(&id).await;
        assert!(r["row_count"].as_u64().unwrap() >= 2, "{r}");
        let shown = op.get(&page).await;
        assert!(
            shown.body.contains("id=\"report-status\">ready"),
            "{}",
            shown.body
        );
        let file = op.get(&format!("{page}/file")).await;
        assert_eq!(file.status, 200);
        assert!(file.header("content-disposition").starts_with("attachment"));
        assert!(
            file.body.starts_with("entry_id,transfer_id,kind,"),
            "{}",
            file.body
        );

        // The card page and the ledger page offer theirs.
        let card_page = format!("/console/cards/{card}");
        assert!(op.get(&card_page).await.body.contains("id=\"export\""));
        let c = op
            .act(
                &card_page,
                &format!("{project}/export"),
                &[("type", "card_transactions"), ("format", "csv")],
            )
            .await;
        assert_eq!(c.status, 303, "{}", c.body);
        let ledger = format!("/console/ledger?project={}", t.creds.project_id);
        assert!(op.get(&ledger).await.body.contains("id=\"export-form\""));

        // A bad type is refused, and audited as refused.
        let bad = op
            .act(
                &project,
                &format!("{project}/export"),
                &[("type", "payments")],
            )
            .await;
        assert_eq!((bad.status, bad.location()), (303, project.as_str()));

        let audit: Vec<(String, String, String)> =
            sqlx::query("SELECT actor, action, result FROM audit_log ORDER BY id")
                .fetch_all(t.store.pool())
                .await
                .unwrap()
                .iter()
                .map(|r| (r.get("actor"), r.get("action"), r.get("result")))
                .collect();
        let of = |action: &str| {
            audit
                .iter()
                .filter(|(actor, a, _)| actor == "ops@example.com" && a == action)
                .map(|(_, _, result)| result.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(of("report.export").len(), 3, "{audit:?}");
        assert!(of("report.export")[2].starts_with("error"), "{audit:?}");
        assert_eq!(of("report.create").len(), 2, "{audit:?}");
        assert_eq!(of("report.download"), ["ok"], "{audit:?}");
    }
);
