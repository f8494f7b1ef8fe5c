-- The overview lists deliveries failing now (pending, at least one attempt made), next
-- retry first. On `webhook_deliveries_due` alone that read walked every pending
-- delivery and sorted ties by id: 5,000 pending deliveries due at one moment cost ~17 ms
-- a page view at full scale. Here the rows come in the page's order and the read stops
-- after its ten.
CREATE INDEX webhook_deliveries_failing ON webhook_deliveries(next_attempt_at, id)
    WHERE next_attempt_at IS NOT NULL AND attempts > 0;
