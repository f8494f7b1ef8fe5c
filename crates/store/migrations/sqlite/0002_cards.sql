CREATE TABLE cardholders (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects(id),
    user_id TEXT NOT NULL REFERENCES users(id),
    external_user_id TEXT NOT NULL,
    subprovider_code TEXT NOT NULL,
    product_code TEXT,
    registration_status TEXT NOT NULL,
    kyc_status TEXT NOT NULL,
    kyc_level TEXT NOT NULL,
    kyc_enc TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    registered_at BIGINT,
    activated_at BIGINT,
    UNIQUE (user_id, subprovider_code)
);
CREATE INDEX cardholders_project_created ON cardholders(project_id, created_at);

CREATE TABLE cards (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects(id),
    user_id TEXT NOT NULL REFERENCES users(id),
    external_user_id TEXT NOT NULL,
    cardholder_id TEXT NOT NULL REFERENCES cardholders(id),
    product_code TEXT NOT NULL,
    subprovider_code TEXT NOT NULL,
    card_currency TEXT NOT NULL,
    status TEXT NOT NULL,
    label TEXT,
    provider_card_id TEXT,
    secrets_enc TEXT,
    expiry_month BIGINT,
    expiry_year BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    issued_at BIGINT,
    activated_at BIGINT,
    frozen_at BIGINT,
    closed_at BIGINT
);
CREATE INDEX cards_project_created ON cards(project_id, created_at);
CREATE INDEX cards_user ON cards(user_id);

CREATE TABLE orders (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects(id),
    order_type TEXT NOT NULL,
    status TEXT NOT NULL,
    card_id TEXT,
    balance_before BIGINT,
    balance_after BIGINT,
    last_error TEXT,
    last_error_slug TEXT,
    data TEXT NOT NULL,
    issue_status TEXT,
    topup_status TEXT,
    is_issued BIGINT,
    provider_card_status TEXT,
    attempts BIGINT NOT NULL DEFAULT 0,
    next_attempt_at BIGINT,
    locked_until BIGINT,
    locked_by TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    completed_at BIGINT,
    failed_at BIGINT
);
CREATE INDEX orders_project_created ON orders(project_id, created_at);
CREATE INDEX orders_card ON orders(card_id);
CREATE INDEX orders_runnable ON orders(next_attempt_at) WHERE next_attempt_at IS NOT NULL;

-- The outbox: every event is written in the transaction of the change it reports.
CREATE TABLE events (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects(id),
    event_type TEXT NOT NULL,
    card_id TEXT,
    order_id TEXT,
    payload TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX events_project_created ON events(project_id, created_at);

CREATE TABLE idempotency_keys (
    project_id TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    idem_key TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    state TEXT NOT NULL,
    response_status BIGINT,
    response_body TEXT,
    claimed_until BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (project_id, endpoint, idem_key)
);
CREATE INDEX idempotency_keys_expires ON idempotency_keys(expires_at);

-- The sandbox card provider's own books: what it did for each idempotency key. A real
-- provider keeps these on its side; the sandbox keeps them here so retries after a
-- crash are answered with the first result, exactly like a real provider would.
CREATE TABLE sandbox_provider_ops (
    idempotency_key TEXT PRIMARY KEY,
    operation TEXT NOT NULL,
    provider_card_id TEXT NOT NULL,
    amount BIGINT,
    created_at BIGINT NOT NULL
);
