//! `cards/statement` and `project/statement` (CONTRACT §17): a UTC month of a card's
//! funds (available + pending: a hold is not spent money yet) or of the master balance
//! (master + debt, as `project/balance` shows it), from the ledger. Opening + the sum
//! of every item = closing, to the micro-unit (`issuing_store::statements`); `totals`
//! cover the whole period whatever page is asked.

use crate::flows::card_for_user;
use crate::App;
use issuing_domain::ledger::AccountKind;
use issuing_domain::statement::{
    card_category, project_category, Period, PeriodError, CARD_TOTALS, PROJECT_TOTALS,
};
use issuing_domain::time::{now_micros, to_rfc3339};
use issuing_store::statements::{self, Grouping, KindTotal, Movement};
use issuing_store::writer::AsBatch;
use issuing_store::{ledger, Conn};
use issuing_wire::api::{
    CardStatement, CardStatementTotals, CardsStatement, Decimal, ProjectStatement,
    ProjectStatementResponse, ProjectStatementTotals, ProjectTx, StatementItem,
};
use issuing_wire::{Amount, ApiError};
use std::collections::BTreeMap;

/// CONTRACT §17: items per page.
pub const MAX_LIMIT: u32 = 500;
const DEFAULT_LIMIT: u32 = 100;
/// Far beyond any month's movements; bounds the OFFSET a request can ask for.
const MAX_SKIP: u32 = 10_000_000;

fn period(text: &str, now: i64) -> Result<Period, ApiError> {
    Period::parse(text, now).map_err(|e| match e {
        PeriodError::Malformed => ApiError::validation("period must be a month, YYYY-MM"),
        PeriodError::Future(p) => ApiError::validation(format!("period {p} is in the future")),
    })
}

fn paging(skip: Option<u32>, limit: Option<u32>) -> Result<(i64, i64), ApiError> {
    let skip = skip.unwrap_or(0);
    let limit = limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::validation(format!(
            "limit must be between 1 and {MAX_LIMIT}"
        )));
    }
    if skip > MAX_SKIP {
        return Err(ApiError::validation(format!(
            "skip must be at most {MAX_SKIP}"
        )));
    }
    Ok((i64::from(skip), i64::from(limit)))
}

fn dec(micros: i64) -> Decimal {
    Decimal::from(Amount::from_micros(micros))
}

/// The sums of `totals` per category (every category present, zero when empty).
fn by_category(
    names: &[&'static str],
    totals: &[KindTotal],
    category: impl Fn(&KindTotal) -> &'static str,
) -> (BTreeMap<&'static str, i64>, i64) {
    let mut sums: BTreeMap<&'static str, i64> = names.iter().map(|n| (*n, 0)).collect();
    let mut count = 0;
    for t in totals {
        *sums.entry(category(t)).or_insert(0) += t.amount;
        count += t.count;
    }
    (sums, count)
}

/// The card transaction a movement's reference names (`{transaction_id}:{suffix}`),
/// or the dispute (`{dispute_id}:{step}`) for a dispute's movement.
fn reference_id(m: &Movement) -> Option<&str> {
    m.reference.as_deref().and_then(|r| r.split(':').next())
}

fn describe(kind: &str, merchant: Option<&String>) -> String {
    let at = |what: &str| match merchant {
        Some(name) => format!("{what}: {name}"),
        None => what.to_owned(),
    };
    match kind {
        "topup" => "Topup".into(),
        "withdrawal" => "Withdrawal to the master balance".into(),
        "purchase" => at("Purchase"),
        "refund" => at("Refund"),
        "dispute_credit" => at("Dispute credit"),
        "dispute_debit" => at("Dispute credit taken back"),
        "fee" => "Fee".into(),
        _ => "Other".into(),
    }
}

/// The disputed transaction of each dispute a page's movements name.
async fn disputed_transactions(
    conn: &mut Conn,
    project_id: &str,
    movements: &[Movement],
) -> Result<std::collections::HashMap<String, String>, ApiError> {
    let ids: Vec<&str> = movements
        .iter()
        .filter(|m| card_category(&m.kind).1.starts_with("dispute_"))
        .filter_map(reference_id)
        .collect();
    Ok(issuing_store::disputes::transactions_of(conn, project_id, &ids).await?)
}

async fn card_accounts(
    conn: &mut Conn,
    project_id: &str,
    card_id: &str,
) -> Result<Vec<String>, ApiError> {
    let mut out = Vec::with_capacity(2);
    for kind in [AccountKind::Card, AccountKind::CardHold] {
        out.push(ledger::card_account_id(conn, project_id, card_id, kind).await?);
    }
    Ok(out)
}

/// `cards/statement`.
pub async fn card(
    state: &App,
    project_id: &str,
    req: &CardsStatement,
) -> Result<CardStatement, ApiError> {
    let now = now_micros();
    let p = period(&req.period, now)?;
    let (skip, limit) = paging(req.skip, req.limit)?;
    let mut conn = state.store.conn().await?;
    let card = card_for_user(
        &mut conn,
        project_id,
        Some(&req.card_id),
        req.external_user_id.as_deref(),
    )
    .await?;
    let accounts = card_accounts(&mut conn, project_id, &card.id).await?;
    let span = (p.start, p.close(now));
    let opening = statements::balance_before(&mut conn, &accounts, span.0).await?;
    let closing = statements::balance_before(&mut conn, &accounts, span.1).await?;
    let pending = statements::balance_before(&mut conn, &accounts[1..], span.1).await?;
    let totals =
        statements::totals(&mut conn, project_id, &accounts, span, Grouping::ByTransfer).await?;
    let (sums, total) = by_category(&CARD_TOTALS, &totals, |t| card_category(&t.kind).0);
    debug_assert_eq!(opening + sums.values().sum::<i64>(), closing);
    let movements = statements::page(
        &mut conn,
        project_id,
        &accounts,
        span,
        Grouping::ByTransfer,
        (skip, limit),
    )
    .await?;
    let disputed = disputed_transactions(&mut conn, project_id, &movements).await?;
    let mut ids: Vec<&str> = movements.iter().filter_map(reference_id).collect();
    ids.extend(disputed.values().map(String::as_str));
    let merchants = statements::merchant_names(&mut conn, project_id, &ids).await?;
    let items = movements
        .iter()
        .map(|m| {
            let kind = card_category(&m.kind).1;
            let id = reference_id(m);
            let dispute = kind.starts_with("dispute_");
            StatementItem {
                at: to_rfc3339(m.at),
                kind: kind.into(),
                amount: dec(m.amount),
                balance_after: dec(opening + m.running),
                transaction_id: if dispute { None } else { id.map(str::to_owned) }
                    .filter(|_| m.order_id.is_none()),
                order_id: m.order_id.clone(),
                dispute_id: if dispute { id.map(str::to_owned) } else { None },
                // A dispute's movement names the merchant of the disputed transaction.
                description: describe(
                    kind,
                    id.map(|i| disputed.get(i).map_or(i, String::as_str))
                        .and_then(|i| merchants.get(i)),
                ),
            }
        })
        .collect();
    let t = |name: &str| dec(sums.get(name).copied().unwrap_or(0));
    Ok(CardStatement {
        card_id: card.id,
        period: p.label(),
        opening_balance: dec(opening),
        closing_balance: dec(closing),
        pending_at_close: dec(pending),
        totals: CardStatementTotals {
            topups: t("topups"),
            withdrawals: t("withdrawals"),
            purchases: t("purchases"),
            refunds: t("refunds"),
            dispute_credits: t("dispute_credits"),
            dispute_debits: t("dispute_debits"),
            fees: t("fees"),
            other: t("other"),
        },
        items,
        total: u64::try_from(total).unwrap_or(0),
        skip: u64::try_from(skip).unwrap_or(0),
        limit: u64::try_from(limit).unwrap_or(0),
    })
}

/// `project/statement`.
pub async fn project(
    state: &App,
    project_id: &str,
    req: &ProjectStatement,
) -> Result<ProjectStatementResponse, ApiError> {
    let now = now_micros();
    let p = period(&req.period, now)?;
    let (skip, limit) = paging(req.skip, req.limit)?;
    let mut conn = state.store.conn().await?;
    let mut accounts = Vec::with_capacity(2);
    for kind in [AccountKind::Master, AccountKind::Debt] {
        accounts.push(ledger::project_account(&mut conn.as_batch(), project_id, kind).await?);
    }
    let span = (p.start, p.close(now));
    let opening = statements::balance_before(&mut conn, &accounts, span.0).await?;
    let closing = statements::balance_before(&mut conn, &accounts, span.1).await?;
    let totals =
        statements::totals(&mut conn, project_id, &accounts, span, Grouping::ByEntry).await?;
    let (sums, total) = by_category(&PROJECT_TOTALS, &totals, |t| {
        project_category(&t.kind, t.closing)
    });
    debug_assert_eq!(opening + sums.values().sum::<i64>(), closing);
    let movements = statements::page(
        &mut conn,
        project_id,
        &accounts,
        span,
        Grouping::ByEntry,
        (skip, limit),
    )
    .await?;
    let items = movements
        .into_iter()
        .map(|m| ProjectTx {
            id: m.entry_id.to_string(),
            kind: m.kind,
            amount: dec(m.amount),
            balance_after: dec(opening + m.running),
            currency: ledger::CURRENCY.into(),
            transfer_id: m.transfer_id,
            order_id: m.order_id,
            card_id: m.card_id,
            reference: m.reference,
            created_at: to_rfc3339(m.at),
        })
        .collect();
    let t = |name: &str| dec(sums.get(name).copied().unwrap_or(0));
    Ok(ProjectStatementResponse {
        period: p.label(),
        opening_balance: dec(opening),
        closing_balance: dec(closing),
        totals: ProjectStatementTotals {
            deposits: t("deposits"),
            card_issue_fees: t("card_issue_fees"),
            card_topups: t("card_topups"),
            card_withdrawals: t("card_withdrawals"),
            card_closes: t("card_closes"),
            disputes: t("disputes"),
            shortfalls: t("shortfalls"),
            adjustments: t("adjustments"),
        },
        items,
        total: u64::try_from(total).unwrap_or(0),
        skip: u64::try_from(skip).unwrap_or(0),
        limit: u64::try_from(limit).unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paging_is_bounded() {
        assert_eq!(paging(None, None).unwrap(), (0, 100));
        assert_eq!(paging(Some(5), Some(500)).unwrap(), (5, 500));
        assert!(paging(None, Some(501)).is_err());
        assert!(paging(None, Some(0)).is_err());
        assert!(paging(Some(MAX_SKIP + 1), None).is_err());
    }

    #[test]
    fn descriptions_name_the_merchant() {
        let shop = "Shop".to_owned();
        assert_eq!(describe("purchase", Some(&shop)), "Purchase: Shop");
        assert_eq!(describe("topup", Some(&shop)), "Topup");
        assert_eq!(describe("refund", None), "Refund");
    }
}
