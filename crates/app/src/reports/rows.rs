//! A report's rows: each type's columns, a page of rows read from the store, and a row
//! written as a CSV line (RFC 4180) or a JSONL object with the same names. Amounts are
//! decimal strings, times RFC 3339.

use issuing_domain::time::to_rfc3339;
use issuing_store::card_txs::CardTxRecord;
use issuing_store::reports::{self as store, Cursor};
use issuing_store::{Conn, StoreError};
use issuing_wire::Amount;

/// One value of a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cell {
    Text(String),
    Bool(bool),
    Null,
}

fn text(s: impl Into<String>) -> Cell {
    Cell::Text(s.into())
}

fn opt(s: Option<impl Into<String>>) -> Cell {
    s.map_or(Cell::Null, |s| Cell::Text(s.into()))
}

fn amount(micros: i64) -> Cell {
    Cell::Text(Amount::from_micros(micros).to_string())
}

fn time(micros: i64) -> Cell {
    Cell::Text(to_rfc3339(micros))
}

fn opt_time(micros: Option<i64>) -> Cell {
    micros.map_or(Cell::Null, time)
}

pub const CARD_TRANSACTIONS: &[&str] = &[
    "transaction_id",
    "card_id",
    "tx_type",
    "auth_type",
    "type",
    "status",
    "card_currency",
    "card_amount",
    "merchant_name",
    "merchant_mcc",
    "merchant_country",
    "merchant_currency",
    "merchant_amount",
    "failure_reason",
    "original_transaction_id",
    "decision_reason",
    "dispute_id",
    "created_at",
    "updated_at",
];

pub const LEDGER_ENTRIES: &[&str] = &[
    "entry_id",
    "transfer_id",
    "kind",
    "order_id",
    "account_id",
    "account_kind",
    "card_id",
    "currency",
    "amount",
    "balance_after",
    "created_at",
];

pub const CARDS: &[&str] = &[
    "card_id",
    "user_id",
    "external_user_id",
    "product_code",
    "status",
    "label",
    "card_currency",
    "created_at",
    "updated_at",
    "issued_at",
    "activated_at",
    "frozen_at",
    "closed_at",
];

pub const DISPUTES: &[&str] = &[
    "dispute_id",
    "transaction_id",
    "card_id",
    "external_user_id",
    "amount",
    "currency",
    "reason",
    "customer_note",
    "status",
    "resolution_reason",
    "provisional_credit",
    "created_at",
    "updated_at",
    "resolved_at",
];

/// A type's columns; None for a type that does not exist.
pub fn columns(report_type: &str) -> Option<&'static [&'static str]> {
    match report_type {
        "card_transactions" => Some(CARD_TRANSACTIONS),
        "ledger_entries" => Some(LEDGER_ENTRIES),
        "cards" => Some(CARDS),
        "disputes" => Some(DISPUTES),
        _ => None,
    }
}

/// As `cards/txs` names it (`card_tx_data.auth_type`).
fn auth_type(t: &CardTxRecord) -> &'static str {
    match t.tx_kind.as_str() {
        "refund" => "refund",
        "other" => "dispute",
        _ if t.auth_amount == 0 => "force_post",
        _ => "authorization",
    }
}

fn card_tx(t: &CardTxRecord, card_currency: Option<&str>) -> Vec<Cell> {
    let merchant = |k: &str| match t.merchant.get(k) {
        Some(serde_json::Value::String(s)) => text(s.as_str()),
        Some(serde_json::Value::Null) | None => Cell::Null,
        Some(v) => text(v.to_string()),
    };
    vec![
        text(&t.id),
        text(&t.card_id),
        text(&t.tx_type),
        text(auth_type(t)),
        text(&t.tx_kind),
        text(&t.status),
        opt(card_currency.map(str::to_ascii_uppercase)),
        amount(t.card_amount),
        merchant("name"),
        merchant("mcc"),
        merchant("country"),
        text(&t.merchant_currency),
        amount(t.merchant_amount),
        opt(t.failure_reason.as_deref()),
        opt(t.original_transaction_id.as_deref()),
        opt(t.decision_reason.as_deref()),
        opt(t.dispute_id.as_deref()),
        time(t.created_at),
        time(t.updated_at),
    ]
}

/// The next page of a report's rows after `cursor`, and the cursor after the page's
/// last row (None when the page is empty: the report has no more rows).
pub async fn page(
    conn: &mut Conn,
    report: &store::ReportRecord,
    cursor: &Cursor,
    limit: i64,
) -> Result<(Vec<Vec<Cell>>, Option<Cursor>), StoreError> {
    let (p, to) = (report.project_id.as_str(), report.to_at);
    let at = |created_at: i64, id: &str, entry_id: i64| Cursor {
        created_at,
        id: id.to_owned(),
        entry_id,
    };
    Ok(match report.report_type.as_str() {
        "card_transactions" => {
            let rows = store::card_tx_page(conn, p, to, cursor, limit).await?;
            let next = rows.last().map(|(t, _)| at(t.created_at, &t.id, 0));
            let cells = rows.iter().map(|(t, c)| card_tx(t, c.as_deref())).collect();
            (cells, next)
        }
        "ledger_entries" => {
            let rows = store::ledger_page(conn, p, to, cursor, limit).await?;
            let next = rows
                .last()
                .map(|e| at(e.created_at, &e.transfer_id, e.entry_id));
            let cells = rows
                .into_iter()
                .map(|e| {
                    vec![
                        text(e.entry_id.to_string()),
                        text(e.transfer_id),
                        text(e.transfer_kind),
                        opt(e.order_id),
                        text(e.account_id),
                        text(e.account_kind),
                        opt(e.card_id),
                        text(e.currency),
                        amount(e.amount),
                        amount(e.balance_after),
                        time(e.created_at),
                    ]
                })
                .collect();
            (cells, next)
        }
        "cards" => {
            let rows = store::cards_page(conn, p, to, cursor, limit).await?;
            let next = rows.last().map(|c| at(c.created_at, &c.id, 0));
            let cells = rows
                .into_iter()
                .map(|c| {
                    vec![
                        text(c.id),
                        text(c.user_id),
                        text(c.external_user_id),
                        text(c.product_code),
                        text(c.status),
                        opt(c.label),
                        text(c.card_currency.to_ascii_uppercase()),
                        time(c.created_at),
                        time(c.updated_at),
                        opt_time(c.issued_at),
                        opt_time(c.activated_at),
                        opt_time(c.frozen_at),
                        opt_time(c.closed_at),
                    ]
                })
                .collect();
            (cells, next)
        }
        "disputes" => {
            let rows = store::disputes_page(conn, p, to, cursor, limit).await?;
            let next = rows.last().map(|d| at(d.created_at, &d.id, 0));
            let cells = rows
                .into_iter()
                .map(|d| {
                    vec![
                        text(d.id),
                        text(d.transaction_id),
                        text(d.card_id),
                        text(d.external_user_id),
                        amount(d.amount),
                        text(issuing_store::ledger::CURRENCY),
                        text(d.reason),
                        opt(d.customer_note),
                        text(d.status),
                        opt(d.resolution_reason),
                        Cell::Bool(d.provisional_credit),
                        time(d.created_at),
                        time(d.updated_at),
                        opt_time(d.resolved_at),
                    ]
                })
                .collect();
            (cells, next)
        }
        other => {
            return Err(StoreError::Corrupt(format!("report type {other:?}")));
        }
    })
}

/// One CSV field (RFC 4180): quoted when it holds a comma, a quote, CR or LF, its
/// quotes doubled.
fn csv_field(out: &mut String, value: &str) {
    if value.contains([',', '"', '\r', '\n']) {
        out.push('"');
        out.push_str(&value.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(value);
    }
}

/// The CSV header line.
pub fn csv_header(out: &mut String, columns: &[&str]) {
    for (i, c) in columns.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        csv_field(out, c);
    }
    out.push_str("\r\n");
}

/// One row as a CSV line (CRLF-terminated, as RFC 4180 has it); null is empty.
pub fn csv_row(out: &mut String, row: &[Cell]) {
    for (i, cell) in row.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        match cell {
            Cell::Text(s) => csv_field(out, s),
            Cell::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Cell::Null => {}
        }
    }
    out.push_str("\r\n");
}

/// One row as a JSON object on its own line.
pub fn jsonl_row(out: &mut String, columns: &[&str], row: &[Cell]) {
    let object: serde_json::Map<String, serde_json::Value> = columns
        .iter()
        .zip(row)
        .map(|(name, cell)| {
            let value = match cell {
                Cell::Text(s) => serde_json::Value::String(s.clone()),
                Cell::Bool(b) => serde_json::Value::Bool(*b),
                Cell::Null => serde_json::Value::Null,
            };
            ((*name).to_owned(), value)
        })
        .collect();
    out.push_str(&serde_json::Value::Object(object).to_string());
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_commas_quotes_and_line_breaks() {
        let mut out = String::new();
        csv_row(
            &mut out,
            &[
                text("plain"),
                text("a,b"),
                text("say \"hi\""),
                text("two\nlines"),
                Cell::Null,
                Cell::Bool(true),
            ],
        );
        assert_eq!(
            out,
            "plain,\"a,b\",\"say \"\"hi\"\"\",\"two\nlines\",,true\r\n"
        );
    }

    #[test]
    fn jsonl_names_every_column() {
        let mut out = String::new();
        jsonl_row(
            &mut out,
            &["a", "b", "c"],
            &[text("1.5"), Cell::Null, Cell::Bool(false)],
        );
        assert_eq!(out, "{\"a\":\"1.5\",\"b\":null,\"c\":false}\n");
    }

    #[test]
    fn every_type_has_columns() {
        for t in super::super::TYPES {
            assert!(columns(t).is_some(), "{t}");
        }
    }
}
