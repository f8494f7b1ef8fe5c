-- Card details without PCI scope (CONTRACT §16): single-use reveal sessions. A session
-- served by our own page is found by the SHA-256 of its token: the database never holds
-- a value a browser could present. A session a provider serves (a Lithic embed) has no
-- token here: the provider's own credential is never stored.
CREATE TABLE reveal_sessions (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    card_id TEXT NOT NULL,
    -- Hex SHA-256 of the page's token; NULL for a provider's session.
    token_hash TEXT UNIQUE,
    -- `page` (ours, at /reveal/{token}) or `lithic_embed`.
    kind TEXT NOT NULL,
    -- The origin allowed to frame the page (`frame-ancestors`).
    target_origin TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    -- Set once, by the one GET that shows the details.
    used_at BIGINT
);
CREATE INDEX reveal_sessions_expires ON reveal_sessions(expires_at);
CREATE INDEX reveal_sessions_card ON reveal_sessions(project_id, card_id, created_at);

-- The console's PCI DSS v4 controls (docs/console.md). Sessions end after an idle
-- time: the last request an operator made (not a live region's poll).
ALTER TABLE console_sessions ADD COLUMN last_seen_at BIGINT NOT NULL DEFAULT 0;
UPDATE console_sessions SET last_seen_at = created_at;

-- Failed logins per client address: one address cannot lock an operator out.
CREATE TABLE console_address_failures (
    address TEXT PRIMARY KEY,
    failures BIGINT NOT NULL,
    window_start BIGINT NOT NULL,
    locked_until BIGINT
);

-- Reveals per operator per hour are counted from the audit log.
CREATE INDEX audit_log_actor_action ON audit_log(actor, action, at);
