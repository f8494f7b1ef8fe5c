-- The operator console (CONTRACT §12): its operators, their sessions, the login
-- lockout, the audit log of every console action and `issuing admin` command, and the
-- results of ledger verifications. Plus the indexes its pages read by: every list is
-- paged by keyset (created_at, id) newest first, across projects or within one.

CREATE TABLE console_operators (
    id TEXT PRIMARY KEY,
    email TEXT NOT NULL UNIQUE,
    -- admin, operator, viewer
    role TEXT NOT NULL,
    -- JSON array of project ids a viewer may read; empty: every project.
    projects TEXT NOT NULL,
    -- Argon2id, PHC string form.
    password_hash TEXT NOT NULL,
    -- active, disabled
    status TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    disabled_at BIGINT
);

-- A session is found by the SHA-256 of its cookie value: the database never holds a
-- value a browser could present.
CREATE TABLE console_sessions (
    token_hash TEXT PRIMARY KEY,
    operator_id TEXT NOT NULL REFERENCES console_operators(id),
    csrf_token TEXT NOT NULL,
    -- A one-time message for the next page (an action's outcome).
    flash TEXT,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX console_sessions_operator ON console_sessions(operator_id);
CREATE INDEX console_sessions_expires ON console_sessions(expires_at);

-- Failed logins per email (known or not, so a lockout tells nothing about accounts).
CREATE TABLE console_login_failures (
    email TEXT PRIMARY KEY,
    failures BIGINT NOT NULL,
    window_start BIGINT NOT NULL,
    locked_until BIGINT
);

-- Append-only: rows are never updated or deleted.
CREATE TABLE audit_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at BIGINT NOT NULL,
    -- The operator's email, or `cli` for `issuing admin`.
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    -- The project acted on, when there is one (scopes what a viewer sees).
    project_id TEXT,
    -- JSON object: the ids acted on.
    targets TEXT NOT NULL,
    result TEXT NOT NULL
);
CREATE INDEX audit_log_project ON audit_log(project_id, id);
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit log rows are immutable'); END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit log rows are immutable'); END;

-- Each run of verify-ledger (console or `issuing admin verify-ledger`).
CREATE TABLE ledger_verifications (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at BIGINT NOT NULL,
    finished_at BIGINT NOT NULL,
    actor TEXT NOT NULL,
    problems BIGINT NOT NULL,
    -- The first problems found, one a line (bounded).
    details TEXT NOT NULL
);

-- `label` is the card number's last 4 digits: search by last 4 is an index lookup.
CREATE INDEX cards_label ON cards(label) WHERE label IS NOT NULL;
CREATE INDEX cards_external_user ON cards(external_user_id);
CREATE INDEX cards_created ON cards(created_at, id);
CREATE INDEX cards_project_created_id ON cards(project_id, created_at, id);
CREATE INDEX card_transactions_card_created ON card_transactions(card_id, created_at, id);
CREATE INDEX card_transactions_created ON card_transactions(created_at);
CREATE INDEX orders_card_created ON orders(card_id, created_at, id);
CREATE INDEX orders_status_created ON orders(status, created_at);
CREATE INDEX webhook_deliveries_created ON webhook_deliveries(created_at, id);
CREATE INDEX webhook_deliveries_state_created ON webhook_deliveries(state, created_at, id);
CREATE INDEX transfers_created ON transfers(created_at, id);
CREATE INDEX transfers_kind_created ON transfers(kind, created_at, id);
CREATE INDEX transfers_project_created ON transfers(project_id, created_at, id);
