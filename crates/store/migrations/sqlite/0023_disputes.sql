-- Disputes (CONTRACT §15). A dispute contests one settled card transaction; its money
-- moves as ledger transfers whose reference is '{dispute_id}:{step}' (credit, won,
-- debit, shortfall), unique per kind, so no step can be posted twice and
-- verify-ledger finds each dispute's movements by index.
CREATE TABLE disputes (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    transaction_id TEXT NOT NULL,
    card_id TEXT NOT NULL,
    external_user_id TEXT NOT NULL,
    amount BIGINT NOT NULL CHECK (amount > 0),
    reason TEXT NOT NULL,
    customer_note TEXT,
    status TEXT NOT NULL,
    resolution_reason TEXT,
    provisional_credit BIGINT NOT NULL,
    -- The provider's own dispute (Lithic's token); NULL in the sandbox.
    provider_dispute_id TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    resolved_at BIGINT
);
CREATE INDEX disputes_project_created ON disputes(project_id, created_at, id);
CREATE INDEX disputes_transaction ON disputes(project_id, transaction_id);
CREATE INDEX disputes_card ON disputes(project_id, card_id, created_at);
CREATE INDEX disputes_status_created ON disputes(status, created_at, id);
CREATE UNIQUE INDEX disputes_provider ON disputes(provider_dispute_id) WHERE provider_dispute_id IS NOT NULL;
-- At most one open dispute per transaction, whatever races.
CREATE UNIQUE INDEX disputes_one_open ON disputes(project_id, transaction_id)
    WHERE status IN ('submitted', 'representment', 'prearbitration', 'arbitration');

-- Append-only: one row per status a dispute took, in order.
CREATE TABLE dispute_timeline (
    dispute_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    at BIGINT NOT NULL,
    status TEXT NOT NULL,
    note TEXT,
    PRIMARY KEY (dispute_id, seq)
);

-- Evidence files, sealed with the master key (the content is never stored plain).
CREATE TABLE dispute_evidence (
    id TEXT PRIMARY KEY,
    dispute_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    filename TEXT NOT NULL,
    content_type TEXT NOT NULL,
    size BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    sealed TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX dispute_evidence_dispute ON dispute_evidence(dispute_id, created_at);

-- A dispute's card-side movements (credits, taken-back credits) are card transactions
-- of type 'other' that name it.
ALTER TABLE card_transactions ADD COLUMN dispute_id TEXT;

-- Every project gets the account it fronts provisional credits from.
INSERT INTO accounts (id, project_id, kind, card_id, currency, balance, allow_negative, created_at)
SELECT lower(hex(randomblob(12))), p.id, 'dispute', NULL, 'usdt', 0, 1, CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)
FROM projects p
WHERE NOT EXISTS (SELECT 1 FROM accounts a WHERE a.project_id = p.id AND a.kind = 'dispute' AND a.card_id IS NULL);

-- When a transaction first settled: a dispute may be filed up to 120 days after.
-- Earlier settlements take their last change as the best record there is.
ALTER TABLE card_transactions ADD COLUMN settled_at BIGINT;
UPDATE card_transactions SET settled_at = updated_at WHERE cleared > 0;
