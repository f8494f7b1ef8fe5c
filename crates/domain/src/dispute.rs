//! A dispute's life (CONTRACT §15), as pure rules: its states, the moves between them,
//! and the resolution reason each final state carries. Storage, money and HTTP live
//! elsewhere; every path that changes a dispute's status (the sandbox's
//! `simulate/disputes/advance`, `disputes/withdraw`, Lithic's `dispute.updated`) asks
//! `advance` first, so one table decides them all.
//!
//! The states follow the network's process, as Lithic's chargebacks API names it:
//!
//! ```text
//! submitted ──▶ representment ──▶ prearbitration ──▶ arbitration   forward only, and
//!     │               │                 │                 │         any stage skipped
//!     └───────────────┴────────┬────────┴─────────────────┘
//!                              ▼
//!                 won  │  lost  │  withdrawn                         final
//! ```
//!
//! - A dispute starts `submitted` (the answer of `disputes/create`).
//! - The open stages only go forward: `submitted` → `representment` → `prearbitration`
//!   → `arbitration`, and any of them may be skipped (a network may go straight to
//!   arbitration). Never back, and never to the stage it is in: a move to the current
//!   status is not a move (`NotAllowed`); Lithic's events that repeat a status are
//!   told apart by their caller and change nothing.
//! - From any open stage the network decides, `won` or `lost`, or the project gives up,
//!   `withdrawn` (`disputes/withdraw`). These are final: any move out of them is
//!   refused (`Final`), which the API answers 422 `invalid_status_transition`.
//! - A final state carries a resolution reason of its own kind, and an open one none:
//!   `won` takes `won_first_chargeback`, `won_prearbitration` or `won_arbitration`;
//!   `lost` takes `case_lost`, `network_rejected`, `past_filing_date` or
//!   `no_dispute_rights`; `withdrawn` takes `withdrawn`. A reason of another kind is
//!   refused (`ReasonMismatch`), a reason for an open stage too (`ReasonForOpenStatus`).
//! - When no reason is given, the final state's default is the stage it ends from: a
//!   dispute won in prearbitration was `won_prearbitration`, in arbitration
//!   `won_arbitration`, before either `won_first_chargeback`; lost is `case_lost`. A
//!   reason given is not checked against the stage: Lithic decides it, and an event it
//!   sends may skip stages we never saw.

use std::fmt;

/// A dispute's `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DisputeStatus {
    Submitted,
    Representment,
    Prearbitration,
    Arbitration,
    Won,
    Lost,
    Withdrawn,
}

impl DisputeStatus {
    /// Every status, open stages first, in the network's order.
    pub const ALL: [DisputeStatus; 7] = [
        DisputeStatus::Submitted,
        DisputeStatus::Representment,
        DisputeStatus::Prearbitration,
        DisputeStatus::Arbitration,
        DisputeStatus::Won,
        DisputeStatus::Lost,
        DisputeStatus::Withdrawn,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            DisputeStatus::Submitted => "submitted",
            DisputeStatus::Representment => "representment",
            DisputeStatus::Prearbitration => "prearbitration",
            DisputeStatus::Arbitration => "arbitration",
            DisputeStatus::Won => "won",
            DisputeStatus::Lost => "lost",
            DisputeStatus::Withdrawn => "withdrawn",
        }
    }

    pub fn parse(s: &str) -> Option<DisputeStatus> {
        Self::ALL.into_iter().find(|x| x.as_str() == s)
    }

    /// `won`, `lost` and `withdrawn`: nothing leaves them.
    pub const fn is_final(self) -> bool {
        matches!(
            self,
            DisputeStatus::Won | DisputeStatus::Lost | DisputeStatus::Withdrawn
        )
    }

    /// The statuses a dispute in this one may move to, in `ALL`'s order.
    pub fn next(self) -> impl Iterator<Item = DisputeStatus> {
        Self::ALL.into_iter().filter(move |to| allowed(self, *to))
    }

    /// The resolution reason a move from this status to `to` takes when none is given;
    /// None when `to` is not final.
    pub const fn default_reason(self, to: DisputeStatus) -> Option<ResolutionReason> {
        match to {
            DisputeStatus::Won => Some(match self {
                DisputeStatus::Prearbitration => ResolutionReason::WonPrearbitration,
                DisputeStatus::Arbitration => ResolutionReason::WonArbitration,
                _ => ResolutionReason::WonFirstChargeback,
            }),
            DisputeStatus::Lost => Some(ResolutionReason::CaseLost),
            DisputeStatus::Withdrawn => Some(ResolutionReason::Withdrawn),
            _ => None,
        }
    }
}

impl fmt::Display for DisputeStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A final dispute's `resolution_reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResolutionReason {
    WonFirstChargeback,
    WonPrearbitration,
    WonArbitration,
    CaseLost,
    NetworkRejected,
    PastFilingDate,
    NoDisputeRights,
    Withdrawn,
}

impl ResolutionReason {
    pub const ALL: [ResolutionReason; 8] = [
        ResolutionReason::WonFirstChargeback,
        ResolutionReason::WonPrearbitration,
        ResolutionReason::WonArbitration,
        ResolutionReason::CaseLost,
        ResolutionReason::NetworkRejected,
        ResolutionReason::PastFilingDate,
        ResolutionReason::NoDisputeRights,
        ResolutionReason::Withdrawn,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            ResolutionReason::WonFirstChargeback => "won_first_chargeback",
            ResolutionReason::WonPrearbitration => "won_prearbitration",
            ResolutionReason::WonArbitration => "won_arbitration",
            ResolutionReason::CaseLost => "case_lost",
            ResolutionReason::NetworkRejected => "network_rejected",
            ResolutionReason::PastFilingDate => "past_filing_date",
            ResolutionReason::NoDisputeRights => "no_dispute_rights",
            ResolutionReason::Withdrawn => "withdrawn",
        }
    }

    pub fn parse(s: &str) -> Option<ResolutionReason> {
        Self::ALL.into_iter().find(|x| x.as_str() == s)
    }

    /// The final status this reason belongs to.
    pub const fn status(self) -> DisputeStatus {
        match self {
            ResolutionReason::WonFirstChargeback
            | ResolutionReason::WonPrearbitration
            | ResolutionReason::WonArbitration => DisputeStatus::Won,
            ResolutionReason::CaseLost
            | ResolutionReason::NetworkRejected
            | ResolutionReason::PastFilingDate
            | ResolutionReason::NoDisputeRights => DisputeStatus::Lost,
            ResolutionReason::Withdrawn => DisputeStatus::Withdrawn,
        }
    }
}

impl fmt::Display for ResolutionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a dispute is disputed (`disputes/create`'s `reason`), as Lithic names them in
/// upper case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DisputeReason {
    AtmCashMisdispense,
    Cancelled,
    Duplicated,
    FraudCardNotPresent,
    FraudCardPresent,
    FraudOther,
    GoodsServicesNotAsDescribed,
    GoodsServicesNotReceived,
    IncorrectAmount,
    MissingAuth,
    Other,
    ProcessingError,
    RecurringTransactionNotCancelled,
    RefundNotProcessed,
}

impl DisputeReason {
    pub const ALL: [DisputeReason; 14] = [
        DisputeReason::AtmCashMisdispense,
        DisputeReason::Cancelled,
        DisputeReason::Duplicated,
        DisputeReason::FraudCardNotPresent,
        DisputeReason::FraudCardPresent,
        DisputeReason::FraudOther,
        DisputeReason::GoodsServicesNotAsDescribed,
        DisputeReason::GoodsServicesNotReceived,
        DisputeReason::IncorrectAmount,
        DisputeReason::MissingAuth,
        DisputeReason::Other,
        DisputeReason::ProcessingError,
        DisputeReason::RecurringTransactionNotCancelled,
        DisputeReason::RefundNotProcessed,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            DisputeReason::AtmCashMisdispense => "atm_cash_misdispense",
            DisputeReason::Cancelled => "cancelled",
            DisputeReason::Duplicated => "duplicated",
            DisputeReason::FraudCardNotPresent => "fraud_card_not_present",
            DisputeReason::FraudCardPresent => "fraud_card_present",
            DisputeReason::FraudOther => "fraud_other",
            DisputeReason::GoodsServicesNotAsDescribed => "goods_services_not_as_described",
            DisputeReason::GoodsServicesNotReceived => "goods_services_not_received",
            DisputeReason::IncorrectAmount => "incorrect_amount",
            DisputeReason::MissingAuth => "missing_auth",
            DisputeReason::Other => "other",
            DisputeReason::ProcessingError => "processing_error",
            DisputeReason::RecurringTransactionNotCancelled => {
                "recurring_transaction_not_cancelled"
            }
            DisputeReason::RefundNotProcessed => "refund_not_processed",
        }
    }

    pub fn parse(s: &str) -> Option<DisputeReason> {
        Self::ALL.into_iter().find(|x| x.as_str() == s)
    }
}

impl fmt::Display for DisputeReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a dispute is: its status and, once final, its resolution reason. Built only by
/// `Dispute::submitted` and `advance`, so the two always agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dispute {
    status: DisputeStatus,
    resolution_reason: Option<ResolutionReason>,
}

impl Dispute {
    /// A new dispute, as `disputes/create` answers it.
    pub const fn submitted() -> Dispute {
        Dispute {
            status: DisputeStatus::Submitted,
            resolution_reason: None,
        }
    }

    /// A dispute as stored, checked: an open status has no reason, a final one has a
    /// reason of its kind.
    pub fn restore(
        status: DisputeStatus,
        resolution_reason: Option<ResolutionReason>,
    ) -> Option<Dispute> {
        let consistent = match resolution_reason {
            None => !status.is_final(),
            Some(r) => r.status() == status,
        };
        consistent.then_some(Dispute {
            status,
            resolution_reason,
        })
    }

    pub const fn status(self) -> DisputeStatus {
        self.status
    }

    pub const fn resolution_reason(self) -> Option<ResolutionReason> {
        self.resolution_reason
    }

    /// This dispute moved to `to`, with `reason` (or the default of `to` from here when
    /// None), or why it cannot move.
    pub fn advance(
        self,
        to: DisputeStatus,
        reason: Option<ResolutionReason>,
    ) -> Result<Dispute, TransitionError> {
        let from = self.status;
        if from.is_final() {
            return Err(TransitionError::Final { from });
        }
        if !allowed(from, to) {
            return Err(TransitionError::NotAllowed { from, to });
        }
        let resolution_reason = match (reason, to.is_final()) {
            (Some(_), false) => return Err(TransitionError::ReasonForOpenStatus { to }),
            (Some(r), true) if r.status() != to => {
                return Err(TransitionError::ReasonMismatch { to, reason: r })
            }
            (Some(r), true) => Some(r),
            (None, _) => from.default_reason(to),
        };
        Ok(Dispute {
            status: to,
            resolution_reason,
        })
    }

    /// `disputes/withdraw`: the project gives up a dispute that is not final.
    pub fn withdraw(self) -> Result<Dispute, TransitionError> {
        self.advance(DisputeStatus::Withdrawn, Some(ResolutionReason::Withdrawn))
    }
}

/// Whether a dispute in `from` may move to `to` (the graph of the module's comment).
pub fn allowed(from: DisputeStatus, to: DisputeStatus) -> bool {
    use DisputeStatus::*;
    match from {
        Won | Lost | Withdrawn => false,
        Submitted => to != Submitted,
        Representment => !matches!(to, Submitted | Representment),
        Prearbitration => !matches!(to, Submitted | Representment | Prearbitration),
        Arbitration => to.is_final(),
    }
}

/// Why a move is refused. `Final` and `NotAllowed` are the API's 422
/// `invalid_status_transition`; a reason that does not fit is a bad request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    #[error("the dispute is {from}, which is final")]
    Final { from: DisputeStatus },
    #[error("a {from} dispute cannot move to {to}")]
    NotAllowed {
        from: DisputeStatus,
        to: DisputeStatus,
    },
    #[error("resolution_reason is only for won, lost or withdrawn, not {to}")]
    ReasonForOpenStatus { to: DisputeStatus },
    #[error("resolution_reason {reason} is not one of {to}")]
    ReasonMismatch {
        to: DisputeStatus,
        reason: ResolutionReason,
    },
}

impl TransitionError {
    /// The API's slug for this refusal.
    pub const fn slug(self) -> crate::ErrorSlug {
        match self {
            TransitionError::Final { .. } | TransitionError::NotAllowed { .. } => {
                crate::ErrorSlug::InvalidStatusTransition
            }
            TransitionError::ReasonForOpenStatus { .. }
            | TransitionError::ReasonMismatch { .. } => crate::ErrorSlug::ValidationError,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use DisputeStatus::*;

    #[test]
    fn names_round_trip() {
        for s in DisputeStatus::ALL {
            assert_eq!(DisputeStatus::parse(s.as_str()), Some(s));
        }
        for r in ResolutionReason::ALL {
            assert_eq!(ResolutionReason::parse(r.as_str()), Some(r));
        }
        for r in DisputeReason::ALL {
            assert_eq!(DisputeReason::parse(r.as_str()), Some(r));
        }
        assert_eq!(DisputeStatus::parse("WON"), None);
        assert_eq!(ResolutionReason::parse(""), None);
        assert_eq!(DisputeReason::parse("fraud"), None);
    }

    #[test]
    fn the_graph_of_the_contract() {
        let next = |s: DisputeStatus| s.next().collect::<Vec<_>>();
        assert_eq!(
            next(Submitted),
            [
                Representment,
                Prearbitration,
                Arbitration,
                Won,
                Lost,
                Withdrawn
            ]
        );
        assert_eq!(
            next(Representment),
            [Prearbitration, Arbitration, Won, Lost, Withdrawn]
        );
        assert_eq!(next(Prearbitration), [Arbitration, Won, Lost, Withdrawn]);
        assert_eq!(next(Arbitration), [Won, Lost, Withdrawn]);
        for f in [Won, Lost, Withdrawn] {
            assert!(next(f).is_empty(), "{f}");
        }
    }

    #[test]
    fn reasons_and_their_defaults() {
        let d = Dispute::submitted();
        assert_eq!(
            d.advance(Won, None).unwrap().resolution_reason(),
            Some(ResolutionReason::WonFirstChargeback)
        );
        let pre = d.advance(Prearbitration, None).unwrap();
        assert_eq!(pre.resolution_reason(), None);
        assert_eq!(
            pre.advance(Won, None).unwrap().resolution_reason(),
            Some(ResolutionReason::WonPrearbitration)
        );
        let arb = pre.advance(Arbitration, None).unwrap();
        assert_eq!(
            arb.advance(Won, None).unwrap().resolution_reason(),
            Some(ResolutionReason::WonArbitration)
        );
        assert_eq!(
            arb.advance(Lost, None).unwrap().resolution_reason(),
            Some(ResolutionReason::CaseLost)
        );
        // A reason given is Lithic's word, whatever stage we saw.
        assert_eq!(
            d.advance(Won, Some(ResolutionReason::WonArbitration))
                .unwrap()
                .resolution_reason(),
            Some(ResolutionReason::WonArbitration)
        );
        assert_eq!(
            d.advance(Lost, Some(ResolutionReason::Withdrawn)),
            Err(TransitionError::ReasonMismatch {
                to: Lost,
                reason: ResolutionReason::Withdrawn
            })
        );
        assert_eq!(
            d.advance(Representment, Some(ResolutionReason::CaseLost)),
            Err(TransitionError::ReasonForOpenStatus { to: Representment })
        );
        let w = arb.withdraw().unwrap();
        assert_eq!(
            (w.status(), w.resolution_reason()),
            (Withdrawn, Some(ResolutionReason::Withdrawn))
        );
        assert_eq!(
            w.withdraw(),
            Err(TransitionError::Final { from: Withdrawn })
        );
        assert_eq!(
            arb.advance(Representment, None),
            Err(TransitionError::NotAllowed {
                from: Arbitration,
                to: Representment
            })
        );
        assert_eq!(
            d.advance(Submitted, None).unwrap_err().slug(),
            crate::ErrorSlug::InvalidStatusTransition
        );
        assert_eq!(
            d.advance(Lost, Some(ResolutionReason::WonArbitration))
                .unwrap_err()
                .slug(),
            crate::ErrorSlug::ValidationError
        );
    }

    #[test]
    fn restore_keeps_status_and_reason_agreeing() {
        assert!(Dispute::restore(Submitted, None).is_some());
        assert!(Dispute::restore(Won, Some(ResolutionReason::WonArbitration)).is_some());
        assert!(Dispute::restore(Won, None).is_none());
        assert!(Dispute::restore(Won, Some(ResolutionReason::CaseLost)).is_none());
        assert!(Dispute::restore(Arbitration, Some(ResolutionReason::CaseLost)).is_none());
    }

    // ---- the model: stages as numbers, finals as a set, written apart from `allowed`.

    /// 0..=3 for the open stages in the network's order, None for the final ones.
    fn stage(s: DisputeStatus) -> Option<u8> {
        [
            "submitted",
            "representment",
            "prearbitration",
            "arbitration",
        ]
        .iter()
        .position(|n| *n == s.as_str())
        .map(|p| p as u8)
    }

    /// What the model says a move does: the new (status, reason) or a refusal.
    fn model(
        from: (DisputeStatus, Option<ResolutionReason>),
        to: DisputeStatus,
        reason: Option<ResolutionReason>,
    ) -> Option<(DisputeStatus, Option<ResolutionReason>)> {
        let from_stage = stage(from.0)?; // final: nothing moves
        let forward = match stage(to) {
            Some(t) => t > from_stage,
            None => true,
        };
        if !forward {
            return None;
        }
        let kind = |r: ResolutionReason| match r.as_str() {
            "won_first_chargeback" | "won_prearbitration" | "won_arbitration" => "won",
            "withdrawn" => "withdrawn",
            _ => "lost",
        };
        match (stage(to), reason) {
            (Some(_), Some(_)) => None,
            (Some(_), None) => Some((to, None)),
            (None, Some(r)) => (kind(r) == to.as_str()).then_some((to, Some(r))),
            (None, None) => {
                let default = match (to.as_str(), from_stage) {
                    ("won", 2) => "won_prearbitration",
                    ("won", 3) => "won_arbitration",
                    ("won", _) => "won_first_chargeback",
                    ("lost", _) => "case_lost",
                    _ => "withdrawn",
                };
                Some((to, ResolutionReason::parse(default)))
            }
        }
    }

    fn status() -> impl Strategy<Value = DisputeStatus> {
        prop::sample::select(DisputeStatus::ALL.to_vec())
    }

    fn reason() -> impl Strategy<Value = Option<ResolutionReason>> {
        prop::option::of(prop::sample::select(ResolutionReason::ALL.to_vec()))
    }

    #[derive(Debug, Clone)]
    enum Op {
        Advance(DisputeStatus, Option<ResolutionReason>),
        Withdraw,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (status(), reason()).prop_map(|(s, r)| Op::Advance(s, r)),
            1 => Just(Op::Withdraw),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Random moves against the model, from a new dispute: every answer agrees, a
        /// refusal changes nothing, the open stages only go forward, a final status is
        /// never left, and the status and its reason always agree.
        #[test]
        fn moves_follow_the_model(ops in prop::collection::vec(op(), 1..30)) {
            let mut d = Dispute::submitted();
            let mut m = (Submitted, None);
            let mut stages_seen = vec![0u8];
            for op in ops {
                let (to, r) = match op {
                    Op::Advance(to, r) => (to, r),
                    Op::Withdraw => (Withdrawn, Some(ResolutionReason::Withdrawn)),
                };
                let expected = model(m, to, r);
                let got = match op {
                    Op::Advance(..) => d.advance(to, r),
                    Op::Withdraw => d.withdraw(),
                };
                match (got, expected) {
                    (Ok(next), Some(e)) => {
                        prop_assert_eq!((next.status(), next.resolution_reason()), e);
                        d = next;
                        m = e;
                    }
                    (Err(err), None) => {
                        // The refusal's kind: a final dispute says so.
                        prop_assert_eq!(
                            matches!(err, TransitionError::Final { .. }),
                            d.status().is_final()
                        );
                    }
                    (got, expected) => {
                        prop_assert!(false, "{:?} --{:?}--> got {:?}, model {:?}", d, op, got, expected);
                    }
                }
                if let Some(s) = stage(d.status()) {
                    if stages_seen.last() != Some(&s) {
                        prop_assert!(stages_seen.last() < Some(&s), "backwards: {:?}", stages_seen);
                        stages_seen.push(s);
                    }
                }
                prop_assert!(Dispute::restore(d.status(), d.resolution_reason()) == Some(d));
            }
        }

        /// `allowed` against the model's graph for every pair.
        #[test]
        fn allowed_is_the_models_graph(from in status(), to in status()) {
            prop_assert_eq!(allowed(from, to), model((from, None), to, None).is_some());
        }
    }
}
