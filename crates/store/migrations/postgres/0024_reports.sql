-- Reports: a project's rows of one kind over a time window as one CSV or JSONL file,
-- built by a worker from a job that survives restarts. The file is kept as chunks of
-- whole rows (each valid UTF-8), written one short transaction at a time and streamed
-- out chunk by chunk, so neither building nor downloading holds the whole file.
CREATE TABLE reports (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    -- `card_transactions`, `ledger_entries`, `cards` or `disputes`.
    report_type TEXT NOT NULL,
    -- `csv` or `jsonl`.
    format TEXT NOT NULL,
    from_at BIGINT NOT NULL,
    to_at BIGINT NOT NULL,
    -- `processing`, `ready` or `failed`.
    status TEXT NOT NULL,
    row_count BIGINT,
    size BIGINT,
    sha256 TEXT,
    last_error TEXT,
    -- `api`, or the operator who asked in the console.
    created_by TEXT NOT NULL,
    -- Builds started: a build cut short (a restart) starts again from scratch.
    attempts BIGINT NOT NULL DEFAULT 0,
    locked_by TEXT,
    locked_until BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    ready_at BIGINT,
    -- When the file is deleted (7 days after ready).
    expires_at BIGINT
);
CREATE INDEX reports_project_created ON reports(project_id, created_at);
CREATE INDEX reports_processing ON reports(created_at) WHERE status = 'processing';
CREATE INDEX reports_expires ON reports(expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE report_chunks (
    report_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (report_id, seq)
);

-- Download links: found by the SHA-256 of their token, never by the token.
CREATE TABLE report_tokens (
    token_hash TEXT PRIMARY KEY,
    report_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX report_tokens_expires ON report_tokens(expires_at);
CREATE INDEX report_tokens_report ON report_tokens(report_id);

-- A project's card transactions in creation order, for the keyset pages of a report.
CREATE INDEX card_transactions_project_created ON card_transactions(project_id, created_at, id);
