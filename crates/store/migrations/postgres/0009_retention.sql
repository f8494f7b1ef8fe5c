-- Long-running operation (CONTRACT §13).
-- Retention deletes final deliveries by completion time, then events left without
-- deliveries by creation time: indexes so that neither delete scans its table.
CREATE INDEX webhook_deliveries_completed ON webhook_deliveries(completed_at) WHERE completed_at IS NOT NULL;
CREATE INDEX events_created ON events(created_at);

-- Since when every attempt to the subscription has failed (NULL after a success, or
-- before any failure); past webhook_disable_after it is deactivated as `failing`.
ALTER TABLE webhook_subscriptions ADD COLUMN failing_since BIGINT;
CREATE INDEX webhook_subscriptions_failing ON webhook_subscriptions(failing_since)
    WHERE active = 1 AND failing_since IS NOT NULL;

-- The replay guard lives in the database here (replay_guard), shared by every process;
-- nothing is handed over at a restart.
