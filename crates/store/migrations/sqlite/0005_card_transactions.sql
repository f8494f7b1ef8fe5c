-- Card spending: every card gets a hold account beside its funds (authorizations move
-- money from the card into it; clearing moves it on to the network), the card
-- transactions themselves, the card network messages already applied (so a replayed
-- message never posts twice), and 3-D Secure / OTP challenges.
DROP INDEX accounts_card;
CREATE UNIQUE INDEX accounts_card_kind ON accounts(card_id, kind) WHERE card_id IS NOT NULL;
INSERT INTO accounts (id, project_id, kind, card_id, currency, balance, allow_negative, created_at)
SELECT lower(hex(randomblob(12))), c.project_id, 'card_hold', c.id, 'usdt', 0, 0, c.created_at
FROM cards c
WHERE NOT EXISTS (
    SELECT 1 FROM accounts a WHERE a.card_id = c.id AND a.kind = 'card_hold'
);

CREATE TABLE card_transactions (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects(id),
    card_id TEXT NOT NULL REFERENCES cards(id),
    -- auth, reversal, refund (card_tx_data.type) and pending, approved, declined.
    tx_kind TEXT NOT NULL,
    status TEXT NOT NULL,
    tx_type TEXT NOT NULL,
    -- Authorized amount, still held, cleared, refunded so far; micro-units.
    auth_amount BIGINT NOT NULL,
    held BIGINT NOT NULL,
    card_amount BIGINT NOT NULL,
    cleared BIGINT NOT NULL DEFAULT 0,
    refunded BIGINT NOT NULL DEFAULT 0,
    original_transaction_id TEXT,
    merchant TEXT NOT NULL,
    merchant_currency TEXT NOT NULL,
    merchant_amount BIGINT NOT NULL,
    failure_reason TEXT,
    hold_expires_at BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX card_transactions_card ON card_transactions(project_id, card_id, updated_at);
CREATE INDEX card_transactions_hold_expiry ON card_transactions(hold_expires_at) WHERE hold_expires_at IS NOT NULL;

CREATE TABLE card_network_messages (
    project_id TEXT NOT NULL REFERENCES projects(id),
    message_id TEXT NOT NULL,
    transaction_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (project_id, message_id)
);

CREATE TABLE card_securements (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects(id),
    card_id TEXT NOT NULL REFERENCES cards(id),
    method TEXT NOT NULL,
    -- pending, confirmed, declined
    state TEXT NOT NULL,
    amount BIGINT NOT NULL,
    currency TEXT NOT NULL,
    merchant TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    answered_at BIGINT
);
CREATE INDEX card_securements_card ON card_securements(card_id);
