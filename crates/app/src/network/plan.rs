//! What a network message decided to change, before anything is written: the card
//! transaction rows, the ledger moves of its money, whether its `card_transaction`
//! event is emitted, and the rule results to record. Each message kind builds its
//! plan from what it read (pure code); `execute.rs` applies it.

use issuing_domain::card_tx::{tx_type, TxKind, TxStatus};
use issuing_domain::controls::limits::Counted;
use issuing_domain::ids::new_id;
use issuing_domain::ledger::TransferKind;
use issuing_store::card_txs::CardTxRecord;
use issuing_store::cards::CardRecord;
use issuing_store::controls::RuleResult;

use super::Purchase;

/// Which account a move touches: the card's, or (for the network and a shortfall) the
/// project's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Funds,
    Hold,
    Network,
    /// The project's master balance; only a real network's shortfall takes from it,
    /// with the master account locked before the card's.
    Master,
    /// The project's debt: what a shortfall took beyond the master balance.
    Debt,
}

/// One ledger transfer of the subject transaction's money; zero moves nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    pub kind: TransferKind,
    pub from: Side,
    pub to: Side,
    pub micros: i64,
}

impl Move {
    pub fn new(kind: TransferKind, from: Side, to: Side, micros: i64) -> Move {
        debug_assert!(micros >= 0);
        Move {
            kind,
            from,
            to,
            micros,
        }
    }
}

/// A row write: a new transaction, or a change conditional on the row still being
/// `prev` (another message that changed it first makes the change fail).
#[derive(Debug, Clone)]
pub enum Write {
    Insert(Box<CardTxRecord>),
    Update {
        prev: Box<CardTxRecord>,
        next: Box<CardTxRecord>,
    },
}

#[derive(Debug, Clone)]
pub struct Plan {
    /// Applied in order.
    pub writes: Vec<Write>,
    /// Tagged with the subject transaction; applied in order, after the writes.
    pub moves: Vec<Move>,
    /// The transaction the message is about, as it will be: its event is emitted and
    /// it is the answer.
    pub subject: CardTxRecord,
    /// False only while a decision webhook is awaited: the event waits for the decision.
    pub emit: bool,
    pub rule_results: Vec<RuleResult>,
    /// What the refusal of a conditional update is answered as (`Cannot {action} …`).
    pub action: &'static str,
}

impl Plan {
    /// A plan that changes one existing transaction.
    pub fn update(
        prev: &CardTxRecord,
        next: CardTxRecord,
        moves: Vec<Move>,
        action: &'static str,
    ) -> Plan {
        Plan {
            writes: vec![Write::Update {
                prev: Box::new(prev.clone()),
                next: Box::new(next.clone()),
            }],
            moves,
            subject: next,
            emit: true,
            rule_results: Vec::new(),
            action,
        }
    }

    /// A plan that creates one transaction.
    pub fn insert(rec: CardTxRecord, moves: Vec<Move>) -> Plan {
        Plan {
            writes: vec![Write::Insert(Box::new(rec.clone()))],
            moves,
            subject: rec,
            emit: true,
            rule_results: Vec::new(),
            action: "create",
        }
    }
}

/// A fresh transaction record on `card` (ids and times filled in), counting nothing.
pub fn new_tx(
    card: &CardRecord,
    kind: TxKind,
    status: TxStatus,
    amount: i64,
    purchase: &Purchase,
    now: i64,
) -> CardTxRecord {
    CardTxRecord {
        id: new_id(),
        project_id: card.project_id.clone(),
        card_id: card.id.clone(),
        tx_kind: kind.as_str().into(),
        status: status.as_str().into(),
        tx_type: tx_type(true, kind, status),
        auth_amount: amount,
        held: 0,
        card_amount: amount,
        cleared: 0,
        refunded: 0,
        original_transaction_id: None,
        merchant: purchase.merchant.to_json(),
        merchant_currency: purchase.merchant_currency.clone(),
        merchant_amount: purchase.merchant_amount.micros(),
        failure_reason: None,
        hold_expires_at: None,
        created_at: now,
        updated_at: now,
        mcc: Some(purchase.merchant.mcc.clone()),
        counted_amount: 0,
        counts: false,
        decline: None,
        decision_reason: None,
        decision_state: None,
        decision_deadline: None,
        decision_on_timeout: None,
        dispute_id: None,
        settled_at: None,
    }
}

/// How the transaction counts toward limits now.
pub fn counted(t: &CardTxRecord) -> Counted {
    Counted {
        amount: t.counted_amount,
        counts: t.counts,
    }
}

/// Sets what the transaction counts.
pub fn set_counted(t: &mut CardTxRecord, c: Counted) {
    t.counted_amount = c.amount;
    t.counts = c.counts;
}
