//! Clearings (an authorization settles, at its held amount or another) and force posts
//! (a settlement with no authorization): money leaves the card to the network. Neither
//! is ever declined by a limit (CONTRACT §11). Beyond the card's funds the simulator's
//! settlement is refused; a real network's is not: the card goes to zero and the
//! project pays the rest (`Origin`, `docs/money.md` Shortfalls).

use super::execute::{commit, execute, read_issued_card, read_tx};
use super::plan::{counted, new_tx, set_counted, Move, Plan, Side};
use super::{kind_of, wrong_state, Applied, Origin, Purchase};
use crate::App;
use issuing_domain::card_tx::{clearing, is_open_auth, tx_type, TxKind, TxStatus};
use issuing_domain::controls::limits::Counted;
use issuing_domain::ledger::{shortfall, AccountKind, TransferKind};
use issuing_domain::time::now_micros;
use issuing_store::card_txs::CardTxRecord;
use issuing_store::cards::CardRecord;
use issuing_store::writer::AsBatch;
use issuing_store::{ledger, Tx};
use issuing_wire::{Amount, ApiError};

/// A clearing of one authorization.
pub(super) struct Clearing<'a> {
    pub transaction_id: &'a str,
    pub bill_amount: Option<Amount>,
}

/// A posting without an authorization.
pub(super) struct ForcePost<'a> {
    pub card_id: &'a str,
    pub bill_amount: Amount,
    pub purchase: &'a Purchase,
}

/// Who pays the part of a settlement beyond the hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cover {
    /// The card's free funds alone; the ledger refuses the posting when they lack.
    Card,
    /// The card's free funds (as read under the card's lock), then the project's master
    /// balance, then its debt. `master` is known only once the master account is
    /// locked, which must come before the card's lock.
    Project { card: i64, master: Option<i64> },
}

/// A settlement's plan, or the need to read the master balance first.
enum Planned {
    Ready(Box<Plan>),
    /// The card cannot pay: plan again with the master account locked.
    NeedsMaster,
}

/// Begins a settlement's transaction; with `master` the master account is locked first,
/// as the ledger's lock order wants (master before any card account), and its balance
/// answered.
async fn begin(state: &App, project_id: &str, master: bool) -> Result<(Tx, Option<i64>), ApiError> {
    let mut tx = state.store.begin().await?;
    if !master {
        return Ok((tx, None));
    }
    ledger::lock_project_account(&mut tx.as_batch(), project_id, AccountKind::Master).await?;
    let balance =
        ledger::project_balance(&mut tx.as_batch(), project_id, AccountKind::Master).await?;
    Ok((tx, Some(balance.micros())))
}

fn cover(origin: Origin, card: Amount, master: Option<i64>) -> Cover {
    match origin {
        Origin::Sandbox => Cover::Card,
        Origin::Network => Cover::Project {
            card: card.micros(),
            master,
        },
    }
}

pub(super) async fn clear(
    state: &App,
    project_id: &str,
    c: Clearing<'_>,
    origin: Origin,
    message_id: Option<&str>,
) -> Result<Applied, ApiError> {
    // Most settlements fit the card: only one the card cannot pay takes the master
    // account's lock, in a second attempt that takes it before the card's.
    for master in [false, true] {
        let (mut tx, balance) = begin(state, project_id, master).await?;
        let (locked, prev) = read_tx(&mut tx, project_id, c.transaction_id).await?;
        let cover = cover(origin, locked.available, balance);
        let plan = match plan_clear(&prev, c.bill_amount, cover, now_micros())? {
            Planned::Ready(plan) => *plan,
            Planned::NeedsMaster => continue,
        };
        let applied = execute(&mut tx, &locked.card, plan, message_id, "clearing").await?;
        commit(tx).await?;
        return Ok(applied);
    }
    Err(ApiError::internal())
}

/// The moves that pay `excess`, what a settlement takes beyond its hold; None when the
/// master balance must be read first.
fn excess_moves(excess: i64, cover: Cover) -> Option<Vec<Move>> {
    let spend = |from, micros| Move::new(TransferKind::CardSpend, from, Side::Network, micros);
    let short = |from, micros| Move::new(TransferKind::CardShortfall, from, Side::Network, micros);
    match cover {
        Cover::Card => Some(vec![spend(Side::Funds, excess)]),
        Cover::Project { card, master: None } if excess > card => None,
        Cover::Project { card, master } => {
            let s = shortfall(excess, card, master.unwrap_or(0));
            // The master balance before the debt: `project/txs` shows it emptied first.
            Some(vec![
                spend(Side::Funds, s.from_card),
                short(Side::Master, s.from_master),
                short(Side::Debt, s.from_debt),
            ])
        }
    }
}

/// Settles an open authorization at `bill_amount` (default: its hold). Beyond the hold
/// the bill uses the card's free funds; without them the simulator's posting fails and
/// nothing changes (403 insufficient_funds), a real network's takes the rest from the
/// project.
fn plan_clear(
    prev: &CardTxRecord,
    bill_amount: Option<Amount>,
    cover: Cover,
    now: i64,
) -> Result<Planned, ApiError> {
    let (kind, status) = kind_of(prev)?;
    if !is_open_auth(kind, status) || prev.awaiting_decision() {
        return Err(wrong_state(prev, "clear"));
    }
    let bill = bill_amount.map_or(prev.held, Amount::micros);
    let moves = clearing(prev.held, bill);
    let Some(excess) = excess_moves(moves.from_card, cover) else {
        return Ok(Planned::NeedsMaster);
    };
    let mut next = prev.clone();
    next.status = TxStatus::Approved.as_str().into();
    next.tx_type = tx_type(false, TxKind::Auth, TxStatus::Approved);
    next.held = 0;
    next.cleared = bill;
    next.card_amount = bill;
    next.hold_expires_at = None;
    next.updated_at = now;
    set_counted(&mut next, counted(prev).cleared(prev.held, bill));
    let mut all = vec![
        Move::new(
            TransferKind::CardSpend,
            Side::Hold,
            Side::Network,
            moves.from_hold,
        ),
        Move::new(
            TransferKind::CardHoldRelease,
            Side::Hold,
            Side::Funds,
            moves.released,
        ),
    ];
    all.extend(excess);
    Ok(Planned::Ready(Box::new(Plan::update(
        prev, next, all, "clear",
    ))))
}

pub(super) async fn force_post(
    state: &App,
    project_id: &str,
    p: ForcePost<'_>,
    origin: Origin,
    message_id: Option<&str>,
) -> Result<Applied, ApiError> {
    for master in [false, true] {
        let (mut tx, balance) = begin(state, project_id, master).await?;
        let locked = read_issued_card(&mut tx, project_id, p.card_id).await?;
        let cover = cover(origin, locked.available, balance);
        let plan = match plan_force_post(&locked.card, &p, cover, now_micros()) {
            Planned::Ready(plan) => *plan,
            Planned::NeedsMaster => continue,
        };
        let applied = execute(&mut tx, &locked.card, plan, message_id, "force_post").await?;
        commit(tx).await?;
        return Ok(applied);
    }
    Err(ApiError::internal())
}

/// A posting with no authorization before it: it counts its amount and one toward the
/// card's limits, in the window of its own time. All of it is beyond a hold.
fn plan_force_post(card: &CardRecord, p: &ForcePost<'_>, cover: Cover, now: i64) -> Planned {
    let bill = p.bill_amount;
    let Some(moves) = excess_moves(bill.micros(), cover) else {
        return Planned::NeedsMaster;
    };
    let mut rec = new_tx(
        card,
        TxKind::Auth,
        TxStatus::Approved,
        bill.micros(),
        p.purchase,
        now,
    );
    // No authorization preceded it: nothing was ever held.
    rec.auth_amount = 0;
    rec.cleared = bill.micros();
    set_counted(&mut rec, Counted::approved(bill.micros()));
    Planned::Ready(Box::new(Plan::insert(rec, moves)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::plan::new_tx;
    use crate::network::tests::{card, purchase};

    fn pending(held: i64) -> CardTxRecord {
        let mut t = new_tx(
            &card(),
            TxKind::Auth,
            TxStatus::Pending,
            held,
            &purchase(),
            1,
        );
        t.held = held;
        set_counted(&mut t, Counted::approved(held));
        t
    }

    fn ready(planned: Planned) -> Plan {
        match planned {
            Planned::Ready(plan) => *plan,
            Planned::NeedsMaster => panic!("the plan asked for the master balance"),
        }
    }

    /// (kind, from, micros) of each move that moves something.
    fn moved(plan: &Plan) -> Vec<(TransferKind, Side, i64)> {
        plan.moves
            .iter()
            .filter(|m| m.micros > 0)
            .map(|m| (m.kind, m.from, m.micros))
            .collect()
    }

    #[test]
    fn clearing_counts_the_bill() {
        for (bill, counted_after, moves) in [
            (60, 60, [60, 40, 0]),
            (100, 100, [100, 0, 0]),
            (130, 130, [100, 0, 30]),
        ] {
            let plan = plan_clear(
                &pending(100),
                Some(Amount::from_micros(bill)),
                Cover::Card,
                2,
            )
            .unwrap_or_else(|e| panic!("{e}"));
            let plan = ready(plan);
            assert_eq!(plan.subject.counted_amount, counted_after, "bill {bill}");
            assert!(plan.subject.counts);
            let got: Vec<i64> = plan.moves.iter().map(|m| m.micros).collect();
            assert_eq!(got, moves, "bill {bill}");
        }
    }

    #[test]
    fn a_networks_clearing_beyond_the_card_asks_for_the_master_balance_then_takes_it() {
        let bill = Some(Amount::from_micros(150));
        // Within the card's funds: no master balance needed.
        let within = Cover::Project {
            card: 60,
            master: None,
        };
        let plan =
            ready(plan_clear(&pending(100), bill, within, 2).unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(
            moved(&plan),
            [
                (TransferKind::CardSpend, Side::Hold, 100),
                (TransferKind::CardSpend, Side::Funds, 50)
            ]
        );
        let short = Cover::Project {
            card: 20,
            master: None,
        };
        assert!(matches!(
            plan_clear(&pending(100), bill, short, 2),
            Ok(Planned::NeedsMaster)
        ));
        let known = Cover::Project {
            card: 20,
            master: Some(10),
        };
        let plan =
            ready(plan_clear(&pending(100), bill, known, 2).unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(
            moved(&plan),
            [
                (TransferKind::CardSpend, Side::Hold, 100),
                (TransferKind::CardSpend, Side::Funds, 20),
                (TransferKind::CardShortfall, Side::Master, 10),
                (TransferKind::CardShortfall, Side::Debt, 20),
            ]
        );
        assert_eq!(plan.subject.card_amount, 150);
    }

    #[test]
    fn an_awaited_decision_cannot_be_cleared() {
        let mut t = pending(100);
        t.decision_state = Some(issuing_store::card_txs::AWAITING.into());
        assert!(plan_clear(&t, None, Cover::Card, 2).is_err());
    }

    #[test]
    fn force_posts_count() {
        let p = purchase();
        let post = ForcePost {
            card_id: "card",
            bill_amount: Amount::from_micros(70),
            purchase: &p,
        };
        let plan = ready(plan_force_post(&card(), &post, Cover::Card, 3));
        assert_eq!(
            (plan.subject.counted_amount, plan.subject.counts),
            (70, true)
        );
        assert_eq!(plan.subject.auth_amount, 0);
        let known = Cover::Project {
            card: 30,
            master: Some(100),
        };
        let plan = ready(plan_force_post(&card(), &post, known, 3));
        assert_eq!(
            moved(&plan),
            [
                (TransferKind::CardSpend, Side::Funds, 30),
                (TransferKind::CardShortfall, Side::Master, 40),
            ]
        );
    }
}
