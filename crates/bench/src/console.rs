//! The `console` scenario: the operator console's pages at size. It seeds the demo
//! project straight into the database with 100,000 cards and 1,000,000 card
//! transactions (times `--scale`), a tenth of them on one card, and 100,000 webhook
//! deliveries, then signs in and times every page: the lists (first and a deep page),
//! a card with many transactions, search by last 4 and by external_user_id, one
//! transaction, the overview with its chart. Rows are seeded settled (nothing held),
//! so `verify-ledger` still holds afterwards. The hot card also has spend controls
//! (CONTRACT §11): four limits whose usage its page sums over its transactions, rules
//! (project-wide and scoped to it), a rule match on every tenth of its transactions,
//! and a transaction declined by a rule, whose page is timed too.

use crate::load::{self, Outcome};
use crate::scenarios::Row;
use anyhow::Context;
use sqlx::{AnyConnection, Connection};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const CARDS: usize = 100_000;
const TRANSACTIONS: usize = 1_000_000;
/// One card in ten transactions' worth: the card page with many transactions.
const HOT_SHARE: usize = 10;
const DELIVERIES: usize = 100_000;
/// Requests per page, and how many at once (a few operators, not a crowd).
const REQUESTS_PER_PAGE: usize = 200;
const CONCURRENCY: usize = 4;
/// Rows per INSERT statement. sqlx's SQLite driver looks up each bound variable's name
/// in a list as long as the statement's variables, so a statement costs the square of
/// its variables: 1,000 rows of ~20 columns kept the seed busy for over ten minutes.
const BATCH: usize = 100;
const DAY: i64 = 24 * 3600 * 1_000_000;
/// The hot card's limits as the card row stores them (micro-units): what its page reads
/// the usage of.
const HOT_LIMITS: &str = r#"[{"interval":"daily","amount":500000000},{"interval":"monthly","amount":50000000000,"count":100000},{"interval":"all_time","amount":900000000000},{"interval":"rolling","window_seconds":604800,"count":50000,"mccs":["5999"]}]"#;
/// Rules of the demo project: (name, mode, scoped to the hot card, conditions).
const RULES: &[(&str, &str, bool, &str)] = &[
    (
        "Hot card: block MCC 5999",
        "active",
        true,
        r#"[{"attribute":"mcc","operator":"is_one_of","value":["5999"]}]"#,
    ),
    (
        "Watch amounts over 0.50",
        "shadow",
        false,
        r#"[{"attribute":"amount","operator":"greater_than","value":"0.5"}]"#,
    ),
    (
        "Hot card: seed shops",
        "shadow",
        true,
        r#"[{"attribute":"merchant_name","operator":"contains","value":"seed"}]"#,
    ),
];
/// Every this many of the hot card's transactions matched a shadow rule.
const MATCH_EVERY: usize = 10;

/// What the console scenario needs of the server.
pub struct Target {
    pub console_url: String,
    pub email: String,
    pub password: String,
    pub database_url: String,
    pub project_id: String,
    /// The API as the project calls it (the statement rows).
    pub api: issuing_client::Client,
}

enum Val {
    Text(String),
    Int(i64),
    NullText,
    NullInt,
}

fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// A seeded id of kind `kind` (ids are 24 hex characters; seeded ones start with `be`).
fn id(kind: u8, n: usize) -> String {
    format!("be{kind:02x}{n:020x}")
}

async fn insert(
    conn: &mut AnyConnection,
    table: &str,
    columns: &[&str],
    rows: Vec<Vec<Val>>,
) -> anyhow::Result<()> {
    for chunk in rows.chunks(BATCH) {
        let mut sql = format!("INSERT INTO {table} ({}) VALUES ", columns.join(", "));
        let mut n = 0;
        for (r, row) in chunk.iter().enumerate() {
            if r > 0 {
                sql.push_str(", ");
            }
            sql.push('(');
            for c in 0..row.len() {
                if c > 0 {
                    sql.push_str(", ");
                }
                n += 1;
                sql.push_str(&format!("${n}"));
            }
            sql.push(')');
        }
        let mut q = sqlx::query(&sql);
        for row in chunk {
            for v in row {
                q = match v {
                    Val::Text(s) => q.bind(s.as_str()),
                    Val::Int(i) => q.bind(*i),
                    Val::NullText => q.bind(None::<String>),
                    Val::NullInt => q.bind(None::<i64>),
                };
            }
        }
        q.execute(&mut *conn).await?;
    }
    Ok(())
}

/// What the timed pages look for.
struct Seeded {
    hot_card: String,
    card_cursor: String,
    hot_cursor: String,
    last4: String,
    external_user_id: String,
    transaction: String,
    declined_by_rule: String,
}

async fn seed(t: &Target, scale: f64) -> anyhow::Result<Seeded> {
    let n = |base: usize| ((base as f64 * scale).round() as usize).max(10);
    let (cards, txs, deliveries) = (n(CARDS), n(TRANSACTIONS), n(DELIVERIES));
    sqlx::any::install_default_drivers();
    let mut conn = AnyConnection::connect(&t.database_url)
        .await
        .context("connecting to the benchmark's database")?;
    let now = now_micros();
    let p = || Val::Text(t.project_id.clone());
    // Statement by statement, not one transaction: the server keeps writing meanwhile
    // (on SQLite it would wait for the whole seed).
    let tx = &mut conn;
    // Users, cardholders, cards and their two accounts each, over the last 30 days.
    let card_at = |i: usize| now - 30 * DAY + (i as i64) * (30 * DAY / cards as i64);
    let mut users = Vec::with_capacity(cards);
    let mut holders = Vec::with_capacity(cards);
    let mut card_rows = Vec::with_capacity(cards);
    let mut accounts = Vec::with_capacity(cards * 2);
    for i in 0..cards {
        let at = card_at(i);
        let ext = format!("seed-user-{i}");
        users.push(vec![
            Val::Text(id(1, i)),
            p(),
            Val::Text(ext.clone()),
            Val::Int(at),
            Val::Int(at),
        ]);
        holders.push(vec![
            Val::Text(id(2, i)),
            p(),
            Val::Text(id(1, i)),
            Val::Text(ext.clone()),
            Val::Text("sandbox".into()),
            Val::NullText,
            Val::Text("completed".into()),
            Val::Text("approved".into()),
            Val::Text("basic".into()),
            Val::Int(at),
            Val::Int(at),
        ]);
        // Last 4 digits: 10,000 values, about ten cards each at full size.
        let last4 = format!("{:04}", (i * 7919) % 10_000);
        card_rows.push(vec![
            Val::Text(id(3, i)),
            p(),
            Val::Text(id(1, i)),
            Val::Text(ext),
            Val::Text(id(2, i)),
            Val::Text("virtual_usd".into()),
            Val::Text("sandbox".into()),
            Val::Text("USD".into()),
            Val::Text(if i % 50 == 0 { "frozen" } else { "active" }.into()),
            Val::Text(last4),
            Val::Text(format!("seed-provider-{i}")),
            Val::Int(12),
            Val::Int(2030),
            Val::Int(at),
            Val::Int(at),
            Val::Int(at),
            Val::Int(at),
        ]);
        for (k, kind) in [(4u8, "card"), (5u8, "card_hold")] {
            accounts.push(vec![
                Val::Text(id(k, i)),
                p(),
                Val::Text(kind.into()),
                Val::Text(id(3, i)),
                Val::Text("usdt".into()),
                Val::Int(0),
                Val::Int(0),
                Val::Int(at),
            ]);
        }
    }
    insert(
        tx,
        "users",
        &[
            "id",
            "project_id",
            "external_user_id",
            "created_at",
            "updated_at",
        ],
        users,
    )
    .await?;
    insert(
        tx,
        "cardholders",
        &[
            "id",
            "project_id",
            "user_id",
            "external_user_id",
            "subprovider_code",
            "product_code",
            "registration_status",
            "kyc_status",
            "kyc_level",
            "created_at",
            "updated_at",
        ],
        holders,
    )
    .await?;
    insert(
        tx,
        "cards",
        &[
            "id",
            "project_id",
            "user_id",
            "external_user_id",
            "cardholder_id",
            "product_code",
            "subprovider_code",
            "card_currency",
            "status",
            "label",
            "provider_card_id",
            "expiry_month",
            "expiry_year",
            "created_at",
            "updated_at",
            "issued_at",
            "activated_at",
        ],
        card_rows,
    )
    .await?;
    insert(
        tx,
        "accounts",
        &[
            "id",
            "project_id",
            "kind",
            "card_id",
            "currency",
            "balance",
            "allow_negative",
            "created_at",
        ],
        accounts,
    )
    .await?;
    // Transactions over the last 30 days, settled or declined; a tenth on card 0.
    let hot = txs / HOT_SHARE;
    let tx_at = |i: usize| now - 30 * DAY + (i as i64) * (30 * DAY / txs as i64);
    let mut rows = Vec::with_capacity(BATCH * 10);
    for i in 0..txs {
        let card = if i < hot { 0 } else { 1 + i % (cards - 1) };
        let at = tx_at(i);
        // The hot card's last transaction is the one a rule declined.
        let declined = i % 20 == 0 || i + 1 == hot;
        let amount = 1_000_000 + (i as i64 % 50) * 250_000;
        rows.push(vec![
            Val::Text(id(6, i)),
            p(),
            Val::Text(id(3, card)),
            Val::Text("auth".into()),
            Val::Text(if declined { "declined" } else { "approved" }.into()),
            Val::Text(format!(
                "transaction_created_auth_{}",
                if declined { "declined" } else { "approved" }
            )),
            Val::Int(amount),
            Val::Int(0),
            Val::Int(amount),
            Val::Int(if declined { 0 } else { amount }),
            Val::Int(0),
            Val::NullText,
            Val::Text(r#"{"name":"Seed Shop","mcc":"5999","country":"US"}"#.into()),
            Val::Text("USD".into()),
            Val::Int(amount),
            match (declined, i + 1 == hot) {
                (true, true) => Val::Text("mcc_blocked".into()),
                (true, false) => Val::Text("insufficient_funds".into()),
                (false, _) => Val::NullText,
            },
            Val::NullInt,
            Val::Int(at),
            Val::Int(at),
            Val::Text("5999".into()),
            Val::Int(if declined { 0 } else { amount }),
            Val::Int(i64::from(!declined)),
            if declined && i + 1 == hot {
                Val::Text(format!(r#"{{"rule_ids":["{}"]}}"#, id(10, 0)))
            } else {
                Val::NullText
            },
        ]);
        if rows.len() == BATCH * 10 {
            insert_txs(tx, std::mem::take(&mut rows)).await?;
        }
    }
    insert_txs(tx, rows).await?;
    seed_controls(tx, t, &id(3, 0), hot, tx_at).await?;
    seed_hot_ledger(tx, t, hot, tx_at).await?;
    // Webhook deliveries (and their events) of one subscription: mostly succeeded.
    insert(
        tx,
        "webhook_subscriptions",
        &[
            "id",
            "project_id",
            "url",
            "title",
            "event_types",
            "active",
            "created_at",
            "updated_at",
        ],
        vec![vec![
            Val::Text(id(7, 0)),
            p(),
            Val::Text("http://127.0.0.1:9/seed".into()),
            Val::Text("seed".into()),
            Val::Text("[]".into()),
            Val::Int(0),
            Val::Int(now),
            Val::Int(now),
        ]],
    )
    .await?;
    let mut events = Vec::with_capacity(BATCH * 10);
    let mut sent = Vec::with_capacity(BATCH * 10);
    for i in 0..deliveries {
        // Within 29 days, not 30: the server's retention (30 days by default) deletes
        // older ended deliveries and events every second, and a seed that runs for
        // minutes would see its oldest events go before their deliveries are written.
        let at = now - 29 * DAY + (i as i64) * (29 * DAY / deliveries as i64);
        let state = match i % 20 {
            0 => "failed",
            1 => "pending",
            _ => "succeeded",
        };
        events.push(vec![
            Val::Text(id(8, i)),
            p(),
            Val::Text("card_transaction".into()),
            Val::Text(id(3, 1 + i % (cards - 1))),
            Val::NullText,
            Val::Text("{}".into()),
            Val::Int(at),
        ]);
        sent.push(vec![
            Val::Text(id(9, i)),
            p(),
            Val::Text(id(8, i)),
            Val::Text(id(7, 0)),
            Val::Text("card_transaction".into()),
            Val::Text(state.into()),
            Val::Int(1),
            if state == "succeeded" {
                Val::Int(200)
            } else {
                Val::Int(500)
            },
            // Pending ones are due tomorrow, so the delivery worker leaves them alone.
            if state == "pending" {
                Val::Int(now + DAY)
            } else {
                Val::NullInt
            },
            Val::Int(at),
            Val::Int(at),
            Val::Int(at),
        ]);
        if events.len() == BATCH * 10 || i + 1 == deliveries {
            insert(
                tx,
                "events",
                &[
                    "id",
                    "project_id",
                    "event_type",
                    "card_id",
                    "order_id",
                    "payload",
                    "created_at",
                ],
                std::mem::take(&mut events),
            )
            .await?;
            insert(
                tx,
                "webhook_deliveries",
                &[
                    "id",
                    "project_id",
                    "event_id",
                    "subscription_id",
                    "event_type",
                    "state",
                    "attempts",
                    "last_status",
                    "next_attempt_at",
                    "window_start",
                    "created_at",
                    "updated_at",
                ],
                std::mem::take(&mut sent),
            )
            .await?;
        }
    }
    if t.database_url.starts_with("postgres") {
        // A running PostgreSQL keeps its visibility map and statistics current through
        // autovacuum (docs/operations.md says to keep it on); a table seeded a second
        // ago has neither, so index-only scans would visit the heap. Time the pages on
        // the database a running service would have.
        sqlx::query("VACUUM (ANALYZE)").execute(&mut conn).await?;
    }
    conn.close().await?;
    let mid = cards / 2;
    let hot_mid = hot / 2;
    let hot_at = tx_at(hot_mid);
    Ok(Seeded {
        hot_card: id(3, 0),
        card_cursor: format!("{}.{}", card_at(mid), id(3, mid)),
        hot_cursor: format!("{hot_at}.{}", id(6, hot_mid)),
        last4: format!("{:04}", (mid * 7919) % 10_000),
        external_user_id: format!("seed-user-{mid}"),
        transaction: id(6, txs - 1),
        declined_by_rule: id(6, hot - 1),
    })
}

/// The hot card's money in the ledger, as the server would have written it: a topup
/// before its first transaction, then one `card_spend` per approved transaction (card →
/// network), each at its transaction's time, so statements read a card with that many
/// movements. Balances are added to the accounts' own, which the server may have moved.
async fn seed_hot_ledger(
    conn: &mut AnyConnection,
    t: &Target,
    hot: usize,
    tx_at: impl Fn(usize) -> i64,
) -> anyhow::Result<()> {
    let network: String = sqlx::query_scalar(
        "SELECT id FROM accounts WHERE project_id = $1 AND kind = 'network' AND card_id IS NULL",
    )
    .bind(&t.project_id)
    .fetch_one(&mut *conn)
    .await?;
    let card_account = id(4, 0);
    let amount_of = |i: usize| 1_000_000 + (i as i64 % 50) * 250_000;
    let approved = |i: usize| !(i.is_multiple_of(20) || i + 1 == hot);
    let spent: i64 = (0..hot).filter(|i| approved(*i)).map(amount_of).sum();
    let funded = spent + 100_000_000;
    let mut chain = Chain {
        project_id: t.project_id.clone(),
        card_account: card_account.clone(),
        network: network.clone(),
        ..Chain::default()
    };
    chain.push(
        0,
        "card_refund",
        funded,
        tx_at(0) - 1,
        format!("seed-fund:{}", id(11, 0)),
    );
    let mut flushed = 0;
    for i in 0..hot {
        if approved(i) {
            let reference = format!("{}:{}", id(6, i), id(11, i + 1));
            chain.push(i + 1, "card_spend", -amount_of(i), tx_at(i), reference);
        }
        if chain.transfers.len() >= BATCH * 10 || i + 1 == hot {
            let tr = std::mem::take(&mut chain.transfers);
            let en = std::mem::take(&mut chain.entries);
            let columns = [
                "id",
                "project_id",
                "kind",
                "card_id",
                "reference",
                "created_at",
            ];
            insert(conn, "transfers", &columns, tr).await?;
            let columns = [
                "transfer_id",
                "account_id",
                "amount",
                "balance_after",
                "created_at",
            ];
            insert(conn, "entries", &columns, en).await?;
            flushed += 1;
        }
    }
    anyhow::ensure!(flushed > 0 || hot == 0, "nothing seeded");
    // The chain's balances above start at zero: the accounts keep what the server had
    // moved on them before (the network account's earlier clearings).
    for (account, delta) in [(&card_account, funded - spent), (&network, spent - funded)] {
        sqlx::query("UPDATE accounts SET balance = balance + $1 WHERE id = $2")
            .bind(delta)
            .bind(account)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// Seeded transfers of the hot card and their entries, with each account's balance
/// after them (from zero: see `seed_hot_ledger`).
#[derive(Default)]
struct Chain {
    project_id: String,
    card_account: String,
    network: String,
    transfers: Vec<Vec<Val>>,
    entries: Vec<Vec<Val>>,
    card: i64,
    net: i64,
}

impl Chain {
    /// A transfer of `amount` to the card from the network (negative: to the network).
    fn push(&mut self, n: usize, kind: &str, amount: i64, at: i64, reference: String) {
        self.card += amount;
        self.net -= amount;
        self.transfers.push(vec![
            Val::Text(id(11, n)),
            Val::Text(self.project_id.clone()),
            Val::Text(kind.into()),
            Val::Text(id(3, 0)),
            Val::Text(reference),
            Val::Int(at),
        ]);
        for (account, amount, after) in [
            (self.card_account.clone(), amount, self.card),
            (self.network.clone(), -amount, self.net),
        ] {
            self.entries.push(vec![
                Val::Text(id(11, n)),
                Val::Text(account),
                Val::Int(amount),
                Val::Int(after),
                Val::Int(at),
            ]);
        }
    }
}

async fn insert_txs(conn: &mut AnyConnection, rows: Vec<Vec<Val>>) -> anyhow::Result<()> {
    insert(
        conn,
        "card_transactions",
        &[
            "id",
            "project_id",
            "card_id",
            "tx_kind",
            "status",
            "tx_type",
            "auth_amount",
            "held",
            "card_amount",
            "cleared",
            "refunded",
            "original_transaction_id",
            "merchant",
            "merchant_currency",
            "merchant_amount",
            "failure_reason",
            "hold_expires_at",
            "created_at",
            "updated_at",
            "mcc",
            "counted_amount",
            "counts",
            "decline",
        ],
        rows,
    )
    .await
}

/// The hot card's spend controls: its limits, the project's rules (each with its first
/// version) and a match on every `MATCH_EVERY`th of its transactions, plus the matches
/// of the one a rule declined.
async fn seed_controls(
    conn: &mut AnyConnection,
    t: &Target,
    hot_card: &str,
    hot: usize,
    tx_at: impl Fn(usize) -> i64,
) -> anyhow::Result<()> {
    sqlx::query("UPDATE cards SET limits = $1, limits_timezone = 'UTC' WHERE id = $2")
        .bind(HOT_LIMITS)
        .bind(hot_card)
        .execute(&mut *conn)
        .await?;
    let now = now_micros();
    let p = || Val::Text(t.project_id.clone());
    let scope = || Val::Text(format!(r#"["{hot_card}"]"#));
    let mut rules = Vec::new();
    let mut versions = Vec::new();
    for (n, (name, mode, scoped, conditions)) in RULES.iter().enumerate() {
        // The columns a rule and its first version share, in `rule_columns`' order.
        let fields = || {
            vec![
                p(),
                Val::Text((*name).into()),
                Val::Text((*conditions).into()),
                Val::Text((*mode).into()),
                Val::Int(100 + n as i64),
                if *scoped { scope() } else { Val::NullText },
            ]
        };
        let mut rule = vec![Val::Text(id(10, n))];
        rule.extend(fields());
        rule.extend([Val::Int(1), Val::Int(now), Val::Int(now)]);
        rules.push(rule);
        let mut version = vec![Val::Text(id(10, n)), Val::Int(1)];
        version.extend(fields());
        version.push(Val::Int(now));
        versions.push(version);
    }
    let rule_columns = [
        "project_id",
        "name",
        "conditions",
        "mode",
        "priority",
        "card_ids",
    ];
    let mut columns = vec!["id"];
    columns.extend(rule_columns);
    columns.extend(["version", "created_at", "updated_at"]);
    insert(conn, "auth_rules", &columns, rules).await?;
    let mut columns = vec!["rule_id", "version"];
    columns.extend(rule_columns);
    columns.push("created_at");
    insert(conn, "auth_rule_versions", &columns, versions).await?;
    // As rules/create does: every process's cache of compiled rules sees them.
    sqlx::query("UPDATE projects SET controls_revision = controls_revision + 1 WHERE id = $1")
        .bind(&t.project_id)
        .execute(&mut *conn)
        .await?;
    // Shadow matches (of rule 2, scoped to the hot card) on every tenth transaction, and
    // the blocking and watching rules' matches of the last one.
    let mut results: Vec<Vec<Val>> = (0..hot)
        .step_by(MATCH_EVERY)
        .map(|i| result_row(t, hot_card, 2, i, tx_at(i)))
        .collect();
    for rule in [0, 1] {
        results.push(result_row(t, hot_card, rule, hot - 1, tx_at(hot - 1)));
    }
    insert(
        conn,
        "auth_rule_results",
        &[
            "id",
            "project_id",
            "rule_id",
            "version",
            "transaction_id",
            "card_id",
            "mode",
            "decided",
            "evaluated_at",
        ],
        results,
    )
    .await
}

/// A match of `RULES[rule]` on the seeded transaction `tx`: an active rule's declined it.
fn result_row(t: &Target, card: &str, rule: usize, tx: usize, at: i64) -> Vec<Val> {
    let mode = RULES[rule].1;
    let decided = if mode == "active" { "declined" } else { "none" };
    vec![
        Val::Text(format!("be0b{tx:018x}{rule:02x}")),
        Val::Text(t.project_id.clone()),
        Val::Text(id(10, rule)),
        Val::Int(1),
        Val::Text(id(6, tx)),
        Val::Text(card.to_owned()),
        Val::Text(mode.into()),
        Val::Text(decided.into()),
        Val::Int(at),
    ]
}

/// A signed-in console session: its cookie.
async fn login(http: &reqwest::Client, t: &Target) -> anyhow::Result<String> {
    let res = http
        .post(format!("{}/console/login", t.console_url))
        .form(&[
            ("email", t.email.as_str()),
            ("password", t.password.as_str()),
        ])
        .send()
        .await?;
    anyhow::ensure!(
        res.status().as_u16() == 303,
        "console login answered {}",
        res.status()
    );
    let cookie = res
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .context("no session cookie")?;
    Ok(cookie.to_owned())
}

async fn time_page(http: &reqwest::Client, url: String, cookie: &str, scale: f64) -> Outcome {
    let total = ((REQUESTS_PER_PAGE as f64 * scale.max(0.1)).round() as usize).max(20);
    let (http, cookie) = (http.clone(), cookie.to_owned());
    load::run(total, CONCURRENCY, move |_| {
        let (http, url, cookie) = (http.clone(), url.clone(), cookie.clone());
        async move {
            let r = http
                .get(&url)
                .header("cookie", cookie)
                .send()
                .await
                .map_err(|e| e.to_string())?;
            let status = r.status().as_u16();
            r.bytes().await.map_err(|e| e.to_string())?;
            (status == 200)
                .then_some(())
                .ok_or_else(|| format!("{url}: {status}"))
        }
    })
    .await
}

/// `cards/statement` of the hot card (every approved transaction of it is a movement in
/// the ledger): this month's and last month's first page, and a page deep in the month
/// with the most movements. Each answer must add up (opening + items of a full read is
/// checked by the tests; here the first page's totals against its balances).
async fn time_statements(t: &Target, s: &Seeded, scale: f64) -> anyhow::Result<Vec<Row>> {
    let now = now_micros();
    let month = |at: i64| {
        let d = chrono::DateTime::from_timestamp_micros(at).unwrap_or_default();
        format!("{}", d.format("%Y-%m"))
    };
    let (this, last) = (month(now), month(now - 30 * DAY));
    let mut busiest = (String::new(), 0u64);
    for period in [&this, &last] {
        let v = crate::scenarios::call(
            &t.api,
            "cards/statement",
            serde_json::json!({"card_id": s.hot_card, "period": period, "limit": 1}),
        )
        .await
        .map_err(|e| anyhow::anyhow!("cards/statement: {e}"))?;
        let total = v["total"].as_u64().unwrap_or(0);
        let amount = |f: &str| {
            v[f].as_str()
                .and_then(|x| x.parse::<f64>().ok())
                .unwrap_or(f64::NAN)
        };
        let sum: f64 = v["totals"]
            .as_object()
            .map(|o| {
                o.values()
                    .filter_map(|x| x.as_str()?.parse::<f64>().ok())
                    .sum()
            })
            .unwrap_or(f64::NAN);
        anyhow::ensure!(
            (amount("opening_balance") + sum - amount("closing_balance")).abs() < 0.005,
            "the statement of {period} does not add up: {v}"
        );
        if total > busiest.1 {
            busiest = (period.clone(), total);
        }
    }
    // A tenth of a page's requests: at full scale each statement takes seconds
    // (docs/benchmarks.md, "Statements").
    let total = ((REQUESTS_PER_PAGE as f64 * scale.max(0.1) / 10.0).round() as usize).max(20);
    let timed = [
        (
            format!("card statement, this month ({this}), first 100"),
            this.clone(),
            0u64,
        ),
        (
            format!("card statement, last month ({last}), first 100"),
            last.clone(),
            0,
        ),
        (
            format!(
                "card statement, {} of {} movements in {}, 100 deep",
                busiest.1 / 2,
                busiest.1,
                busiest.0
            ),
            busiest.0.clone(),
            busiest.1 / 2,
        ),
    ];
    let mut rows = Vec::new();
    for (name, period, skip) in timed {
        let (api, card) = (t.api.clone(), s.hot_card.clone());
        let outcome = load::run(total, CONCURRENCY, move |_| {
            let (api, card, period) = (api.clone(), card.clone(), period.clone());
            async move {
                crate::scenarios::call(
                    &api,
                    "cards/statement",
                    serde_json::json!({"card_id": card, "period": period, "skip": skip, "limit": 100}),
                )
                .await
                .map(|_| ())
            }
        })
        .await;
        rows.push(Row {
            name: format!("console: {name}"),
            outcome,
            cpu_secs: None,
            note: String::new(),
        });
    }
    Ok(rows)
}

/// Seeds, then times every page; one row per page.
pub async fn run(t: &Target, scale: f64) -> anyhow::Result<Vec<Row>> {
    let started = std::time::Instant::now();
    let s = seed(t, scale).await?;
    let seeded = started.elapsed();
    eprintln!("  console: seeded in {:.1} s", seeded.as_secs_f64());
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(60))
        .build()?;
    let cookie = login(&http, t).await?;
    // The hot card's page must show what was seeded, or its timing would be of a card
    // without spend controls.
    let hot = http
        .get(format!("{}/console/cards/{}", t.console_url, s.hot_card))
        .header("cookie", &cookie)
        .send()
        .await?
        .text()
        .await?;
    for seeded in [RULES[0].0, RULES[2].0, "all time", "rolling 604800 s"] {
        anyhow::ensure!(
            hot.contains(seeded),
            "the hot card's page does not show {seeded:?}"
        );
    }
    let pages = [
        ("overview", "/console/".to_owned()),
        ("projects", "/console/projects".to_owned()),
        ("project", format!("/console/projects/{}", t.project_id)),
        ("cards", "/console/cards".to_owned()),
        (
            "cards deep page",
            format!("/console/cards?before={}", s.card_cursor),
        ),
        ("cards frozen", "/console/cards?status=frozen".to_owned()),
        ("search last 4", format!("/console/cards?q={}", s.last4)),
        (
            "search external_user_id",
            format!("/console/cards?q={}", s.external_user_id),
        ),
        (
            "card, many transactions, limits and rules",
            format!("/console/cards/{}", s.hot_card),
        ),
        (
            "card, deep transactions",
            format!("/console/cards/{}?before={}", s.hot_card, s.hot_cursor),
        ),
        (
            "transaction",
            format!("/console/transactions/{}", s.transaction),
        ),
        (
            "transaction declined by a rule",
            format!("/console/transactions/{}", s.declined_by_rule),
        ),
        ("webhooks", "/console/webhooks".to_owned()),
        (
            "webhooks failed",
            "/console/webhooks?state=failed".to_owned(),
        ),
        ("ledger", "/console/ledger".to_owned()),
        ("deposits", "/console/deposits".to_owned()),
        ("audit", "/console/audit".to_owned()),
        // Again after every other page: the first row runs right after the seeding,
        // whose writes may still be settling (SQLite's log checkpoint, PostgreSQL's
        // hint bits and statistics), and the two rows together tell that from the page.
        ("overview, last", "/console/".to_owned()),
    ];
    let mut rows = Vec::with_capacity(pages.len() + 3);
    rows.extend(time_statements(t, &s, scale).await?);
    for (i, (name, path)) in pages.into_iter().enumerate() {
        let outcome = time_page(&http, format!("{}{path}", t.console_url), &cookie, scale).await;
        rows.push(Row {
            name: format!("console: {name}"),
            outcome,
            cpu_secs: None,
            note: if i == 0 {
                format!(
                    "seeded {} cards, {} card transactions ({} on one card) and {} deliveries in {:.1} s",
                    ((CARDS as f64 * scale).round() as usize).max(10),
                    ((TRANSACTIONS as f64 * scale).round() as usize).max(10),
                    ((TRANSACTIONS as f64 * scale).round() as usize).max(10) / HOT_SHARE,
                    ((DELIVERIES as f64 * scale).round() as usize).max(10),
                    seeded.as_secs_f64()
                )
            } else {
                String::new()
            },
        });
    }
    Ok(rows)
}
