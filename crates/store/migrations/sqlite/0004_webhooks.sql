-- Webhook subscriptions and the delivery queue. Deliveries are written in the same
-- transaction as their event (one per subscription active at that moment), so fan-out
-- can neither lose an event nor run twice.
CREATE TABLE webhook_subscriptions (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects(id),
    url TEXT NOT NULL,
    title TEXT NOT NULL,
    -- JSON array of event types; empty means every type.
    event_types TEXT NOT NULL,
    active BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    deactivated_at BIGINT,
    deactivated_reason TEXT
);
CREATE INDEX webhook_subscriptions_project ON webhook_subscriptions(project_id, active);
CREATE INDEX webhook_subscriptions_created ON webhook_subscriptions(project_id, created_at);

CREATE TABLE webhook_deliveries (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects(id),
    event_id TEXT NOT NULL REFERENCES events(id),
    subscription_id TEXT NOT NULL REFERENCES webhook_subscriptions(id),
    event_type TEXT NOT NULL,
    -- pending, succeeded, failed
    state TEXT NOT NULL,
    attempts BIGINT NOT NULL DEFAULT 0,
    last_status BIGINT,
    last_error TEXT,
    last_attempt_at BIGINT,
    -- Due time while pending; NULL once finished.
    next_attempt_at BIGINT,
    -- Retries stop webhook_max_age after this (creation, or the last redelivery).
    window_start BIGINT NOT NULL,
    -- A worker's claim on one attempt: a fresh token per claim, and its expiry.
    locked_until BIGINT,
    locked_by TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    completed_at BIGINT,
    UNIQUE (event_id, subscription_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries(next_attempt_at) WHERE next_attempt_at IS NOT NULL;
CREATE INDEX webhook_deliveries_project ON webhook_deliveries(project_id, created_at);
CREATE INDEX webhook_deliveries_subscription ON webhook_deliveries(subscription_id, state);
