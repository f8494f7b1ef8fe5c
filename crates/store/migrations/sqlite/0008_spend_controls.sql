-- Spend controls (CONTRACT §11): card limits, authorization rules with their versions
-- and results, the real-time decision webhook, and what each card transaction counts
-- toward limits.

-- A card's limits (JSON, micro-units) and the time zone of their calendar windows.
ALTER TABLE cards ADD COLUMN limits TEXT;
ALTER TABLE cards ADD COLUMN limits_timezone TEXT;

-- Bumped in the transaction of every change to a project's rules or decision endpoint,
-- and read with the card by every authorization: a process's cache of compiled rules
-- is current exactly when its revision equals this one.
ALTER TABLE projects ADD COLUMN controls_revision BIGINT NOT NULL DEFAULT 0;

-- Usage is summed from the transactions themselves (never from counters), so changing
-- limits never resets it and rolling windows are exact: `counted_amount` is what the
-- transaction counts now, `counts` whether it counts as one authorization, both in the
-- window of its `created_at`.
ALTER TABLE card_transactions ADD COLUMN mcc TEXT;
ALTER TABLE card_transactions ADD COLUMN counted_amount BIGINT NOT NULL DEFAULT 0;
ALTER TABLE card_transactions ADD COLUMN counts BIGINT NOT NULL DEFAULT 0;
-- A declined authorization's `decline` object (JSON), and the decision webhook's reason.
ALTER TABLE card_transactions ADD COLUMN decline TEXT;
ALTER TABLE card_transactions ADD COLUMN decision_reason TEXT;
-- `awaiting` while the decision webhook is asked (funds and usage held tentatively, no
-- event yet), `decided` after; NULL when no webhook was involved.
ALTER TABLE card_transactions ADD COLUMN decision_state TEXT;
ALTER TABLE card_transactions ADD COLUMN decision_deadline BIGINT;
ALTER TABLE card_transactions ADD COLUMN decision_on_timeout TEXT;

UPDATE card_transactions SET mcc = json_extract(merchant, '$.mcc');
-- Approved authorizations and force posts count; a pending one its hold (what partial
-- reversals left), a cleared one what it cleared, a wholly released one nothing but
-- its count. Declines and refunds count nothing.
UPDATE card_transactions
SET counts = 1,
    counted_amount = CASE
        WHEN status = 'pending' THEN held
        WHEN tx_kind = 'reversal' THEN 0
        ELSE cleared
    END
WHERE tx_kind IN ('auth', 'reversal') AND status <> 'declined';

-- Covers the usage aggregate (`card_txs::usage`): only rows that count, with what it
-- sums, so every authorization on a card with limits reads the index alone.
CREATE INDEX card_transactions_usage ON card_transactions(project_id, card_id, created_at, counted_amount, mcc)
    WHERE counts = 1;
CREATE INDEX card_transactions_awaiting ON card_transactions(decision_deadline)
    WHERE decision_state = 'awaiting';

CREATE TABLE auth_rules (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects(id),
    name TEXT NOT NULL,
    -- JSON list of {attribute, operator, value}, as the API shows it.
    conditions TEXT NOT NULL,
    -- active, shadow, inactive
    mode TEXT NOT NULL,
    priority BIGINT NOT NULL,
    -- JSON list of card ids; NULL: every card of the project.
    card_ids TEXT,
    version BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    deleted_at BIGINT
);
CREATE INDEX auth_rules_project ON auth_rules(project_id, created_at);

-- Every version of every rule, as it was; rule results name the version they ran.
CREATE TABLE auth_rule_versions (
    rule_id TEXT NOT NULL REFERENCES auth_rules(id),
    version BIGINT NOT NULL,
    project_id TEXT NOT NULL REFERENCES projects(id),
    name TEXT NOT NULL,
    conditions TEXT NOT NULL,
    mode TEXT NOT NULL,
    priority BIGINT NOT NULL,
    card_ids TEXT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (rule_id, version)
);

-- One row per match of an active or shadow rule.
CREATE TABLE auth_rule_results (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects(id),
    rule_id TEXT NOT NULL,
    version BIGINT NOT NULL,
    transaction_id TEXT NOT NULL,
    card_id TEXT NOT NULL,
    mode TEXT NOT NULL,
    -- declined, none
    decided TEXT NOT NULL,
    evaluated_at BIGINT NOT NULL
);
CREATE INDEX auth_rule_results_project ON auth_rule_results(project_id, evaluated_at);
CREATE INDEX auth_rule_results_rule ON auth_rule_results(project_id, rule_id, evaluated_at);
CREATE INDEX auth_rule_results_tx ON auth_rule_results(project_id, transaction_id);

-- A project's one real-time decision endpoint.
CREATE TABLE decision_endpoints (
    project_id TEXT PRIMARY KEY REFERENCES projects(id),
    url TEXT NOT NULL,
    timeout_ms BIGINT NOT NULL,
    -- approve, decline
    on_timeout TEXT NOT NULL,
    -- live, stand_in
    mode TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
