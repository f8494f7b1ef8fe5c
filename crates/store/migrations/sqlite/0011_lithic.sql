-- The Lithic provider (CONTRACT §14): what Lithic's side of a subprovider needs that our
-- own tables do not hold. Secrets are sealed with the master key.

-- One Lithic account holder per cardholder of a lithic subprovider. `external_id` is
-- derived from the cardholder id and written before the first create, so a create of
-- unknown outcome is looked up by it before it is tried again; `token` is Lithic's id,
-- known once Lithic answered (or an event named it).
CREATE TABLE lithic_account_holders (
    cardholder_id TEXT PRIMARY KEY REFERENCES cardholders(id),
    project_id TEXT NOT NULL REFERENCES projects(id),
    subprovider_code TEXT NOT NULL,
    external_id TEXT NOT NULL UNIQUE,
    token TEXT UNIQUE,
    account_token TEXT,
    -- Lithic's status (ACCEPTED, PENDING_*, REJECTED) and its reasons (a JSON list).
    status TEXT,
    status_reasons TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

-- Lithic's transaction tokens and the card transactions they became.
CREATE TABLE lithic_transactions (
    subprovider_code TEXT NOT NULL,
    token TEXT NOT NULL,
    project_id TEXT NOT NULL REFERENCES projects(id),
    transaction_id TEXT NOT NULL REFERENCES card_transactions(id),
    created_at BIGINT NOT NULL,
    PRIMARY KEY (subprovider_code, token)
);

-- Every transaction event seen, and what became of it (applied or ignored). Applying
-- is made once by the event's network message id; this row records the rest.
CREATE TABLE lithic_events (
    subprovider_code TEXT NOT NULL,
    token TEXT NOT NULL,
    event_type TEXT NOT NULL,
    transaction_token TEXT NOT NULL,
    outcome TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (subprovider_code, token)
);

-- What `issuing admin provider enroll` registered with Lithic, per subprovider.
CREATE TABLE lithic_enrolments (
    subprovider_code TEXT PRIMARY KEY,
    public_url TEXT NOT NULL,
    asa_url TEXT NOT NULL,
    events_url TEXT NOT NULL,
    asa_secret_enc TEXT NOT NULL,
    subscription_token TEXT NOT NULL,
    events_secret_enc TEXT NOT NULL,
    enrolled_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

-- An ASA request or an event names the card by Lithic's token.
CREATE INDEX cards_provider_card ON cards(subprovider_code, provider_card_id);
