-- Settlement reconciliation (CONTRACT §17).
--
-- What this service applied: one row per clearing, force post or refund, written in
-- the transaction that moves its money, so a row exists exactly when the ledger
-- change does. `event_token` is the provider's token of the settlement (Lithic's
-- event token; the sandbox provider's own token), unique per subprovider.
CREATE TABLE applied_settlements (
    subprovider_code TEXT NOT NULL,
    event_token TEXT NOT NULL,
    project_id TEXT NOT NULL,
    transaction_id TEXT NOT NULL,
    card_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    amount BIGINT NOT NULL,
    settled_at BIGINT NOT NULL,
    settled_on TEXT NOT NULL,
    PRIMARY KEY (subprovider_code, event_token)
);
CREATE INDEX applied_settlements_date ON applied_settlements(subprovider_code, settled_on);

-- The sandbox provider's own settlement records: what "the network" settled, the
-- counterpart of Lithic's settlement details. Written with each sandbox clearing and
-- refund; `simulate/settlement/break` edits them to plant a break.
CREATE TABLE sandbox_settlement_records (
    subprovider_code TEXT NOT NULL,
    event_token TEXT NOT NULL,
    project_id TEXT NOT NULL,
    transaction_id TEXT NOT NULL,
    card_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    amount BIGINT NOT NULL,
    settled_at BIGINT NOT NULL,
    settled_on TEXT NOT NULL,
    PRIMARY KEY (subprovider_code, event_token)
);
CREATE INDEX sandbox_settlement_records_date ON sandbox_settlement_records(subprovider_code, settled_on);
CREATE INDEX sandbox_settlement_records_tx ON sandbox_settlement_records(project_id, transaction_id);

-- One reconciliation per (subprovider, date): the row is the daily job's claim
-- (`running`) and then its result. `breaks` is a JSON array.
CREATE TABLE reconciliations (
    subprovider_code TEXT NOT NULL,
    report_date TEXT NOT NULL,
    status TEXT NOT NULL,
    matched_count BIGINT NOT NULL DEFAULT 0,
    matched_cents BIGINT NOT NULL DEFAULT 0,
    missing_here BIGINT NOT NULL DEFAULT 0,
    missing_there BIGINT NOT NULL DEFAULT 0,
    amount_mismatch BIGINT NOT NULL DEFAULT 0,
    breaks TEXT NOT NULL DEFAULT '[]',
    error TEXT,
    started_at BIGINT NOT NULL,
    finished_at BIGINT,
    PRIMARY KEY (subprovider_code, report_date)
);
CREATE INDEX reconciliations_date ON reconciliations(report_date, subprovider_code);
