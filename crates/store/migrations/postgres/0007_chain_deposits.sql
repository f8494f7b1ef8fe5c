-- Deposits that arrive by themselves: HD-derived TRC20 addresses, a per-address cursor
-- for the chain watcher, and every credited chain transfer.
--
-- A project's deposit address is now child 0/deposit_index of the operator's account
-- xpub (m/44'/195'/0'). The random addresses of earlier versions had no private key
-- anyone holds and were never watched: they move to legacy_deposit_address (kept for
-- the record and support questions) and the server assigns derived ones at start.
ALTER TABLE projects ADD COLUMN deposit_index BIGINT;
ALTER TABLE projects ADD COLUMN legacy_deposit_address TEXT;
UPDATE projects SET legacy_deposit_address = deposit_address, deposit_address = NULL
    WHERE deposit_address IS NOT NULL;
-- An index belongs to one project for good.
CREATE UNIQUE INDEX projects_deposit_index ON projects(deposit_index) WHERE deposit_index IS NOT NULL;

-- Allocators that only ever count up, so an index is never handed out twice.
CREATE TABLE chain_counters (
    name TEXT PRIMARY KEY,
    next_value BIGINT NOT NULL
);
INSERT INTO chain_counters (name, next_value) VALUES ('tron_deposit_index', 0);

-- One row per watched deposit address: where the watcher got to and when it looks next.
CREATE TABLE chain_watch (
    address TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects(id),
    network TEXT NOT NULL,
    -- The newest block_timestamp (ms) of a page whose transfers are all credited.
    cursor_ms BIGINT,
    -- When a watcher may poll it next; a claim moves it forward, so other processes
    -- pass over an address being polled.
    next_poll_at BIGINT NOT NULL,
    last_polled_at BIGINT,
    last_error TEXT,
    created_at BIGINT NOT NULL
);
CREATE INDEX chain_watch_due ON chain_watch(next_poll_at);
CREATE INDEX chain_watch_project ON chain_watch(project_id);

-- Every chain transfer credited to a project, once: the primary key is the dedup that
-- makes crediting idempotent across pages, restarts and processes. It is written in
-- the same transaction as the ledger transfer it points to.
CREATE TABLE chain_deposits (
    network TEXT NOT NULL,
    transaction_id TEXT NOT NULL,
    address TEXT NOT NULL,
    project_id TEXT NOT NULL REFERENCES projects(id),
    from_address TEXT NOT NULL,
    token TEXT NOT NULL,
    amount BIGINT NOT NULL,
    block_timestamp BIGINT NOT NULL,
    -- The ledger transfer (kind deposit, reference = transaction_id).
    transfer_id TEXT REFERENCES transfers(id),
    -- watcher, simulated (sandbox simulate/project/deposit)
    source TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (network, transaction_id, address)
);
CREATE INDEX chain_deposits_project ON chain_deposits(project_id, created_at);
