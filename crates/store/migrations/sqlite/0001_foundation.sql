CREATE TABLE settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE projects (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    deposit_address TEXT UNIQUE,
    status TEXT NOT NULL DEFAULT 'active',
    created_at BIGINT NOT NULL
);

CREATE TABLE api_keys (
    api_key TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects(id),
    secret_enc TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
);
CREATE INDEX api_keys_project ON api_keys(project_id);

CREATE TABLE users (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects(id),
    external_user_id TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (project_id, external_user_id)
);
CREATE INDEX users_project_created ON users(project_id, created_at);

CREATE TABLE accounts (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects(id),
    kind TEXT NOT NULL,
    card_id TEXT,
    currency TEXT NOT NULL,
    balance BIGINT NOT NULL DEFAULT 0,
    allow_negative INTEGER NOT NULL,
    created_at BIGINT NOT NULL,
    CHECK (allow_negative = 1 OR balance >= 0)
);
CREATE UNIQUE INDEX accounts_project_kind ON accounts(project_id, kind) WHERE card_id IS NULL;
CREATE UNIQUE INDEX accounts_card ON accounts(card_id) WHERE card_id IS NOT NULL;

CREATE TABLE transfers (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects(id),
    kind TEXT NOT NULL,
    order_id TEXT,
    card_id TEXT,
    reference TEXT,
    created_at BIGINT NOT NULL
);
CREATE UNIQUE INDEX transfers_reference ON transfers(project_id, kind, reference) WHERE reference IS NOT NULL;
CREATE INDEX transfers_order ON transfers(order_id);

CREATE TABLE entries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    transfer_id TEXT NOT NULL REFERENCES transfers(id),
    account_id TEXT NOT NULL REFERENCES accounts(id),
    amount BIGINT NOT NULL,
    balance_after BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX entries_account ON entries(account_id, id);
CREATE INDEX entries_transfer ON entries(transfer_id);

-- Entries are the ledger's history: never rewritten.
CREATE TRIGGER entries_no_update BEFORE UPDATE ON entries
BEGIN SELECT RAISE(ABORT, 'ledger entries are immutable'); END;
CREATE TRIGGER entries_no_delete BEFORE DELETE ON entries
BEGIN SELECT RAISE(ABORT, 'ledger entries are immutable'); END;

CREATE TABLE replay_guard (
    api_key TEXT NOT NULL,
    path TEXT NOT NULL,
    request_timestamp BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (api_key, path, request_timestamp)
);
CREATE INDEX replay_guard_expires ON replay_guard(expires_at);
