-- What each card's transactions count toward its limits, per UTC day and per UTC hour,
-- and MCC (`card_usage::usage`). An authorization on a card with limits summed every
-- counted transaction in its windows, so its cost grew with the card's history (an
-- all-time limit read the whole of it, a daily one all of today's). With these rows a
-- window reads its whole UTC days from the day rows, the whole hours of a partial day
-- from the hour rows, and only a partial first hour (a rolling window's start, a time
-- zone off the hour such as UTC+5:30) from the transactions, which keeps calendar
-- windows in any time zone and rolling windows exact to the microsecond. Buckets are UTC
-- so a card's time zone can change without rewriting anything.
--
-- Kept by a trigger, in the statement that changes a transaction, so no writer (the
-- authorization path, expiry, close, a console seed, a test moving `created_at`) can
-- forget them and no extra round trip is paid. `verify-ledger` compares them with the
-- transactions (`UsageDiffers`).
CREATE TABLE card_usage (
    project_id TEXT NOT NULL,
    card_id TEXT NOT NULL,
    -- The bucket's width in microseconds: 86400000000 (a UTC day) or 3600000000 (an hour).
    span BIGINT NOT NULL,
    -- The bucket's start, microseconds since the epoch, a multiple of `span`.
    bucket BIGINT NOT NULL,
    -- '' for a transaction without an MCC (no MCC-scoped limit matches it).
    mcc TEXT NOT NULL,
    spent BIGINT NOT NULL,
    used_count BIGINT NOT NULL,
    PRIMARY KEY (project_id, card_id, span, bucket, mcc)
);

INSERT INTO card_usage (project_id, card_id, span, bucket, mcc, spent, used_count)
SELECT project_id, card_id, 86400000000, created_at - created_at % 86400000000, COALESCE(mcc, ''),
       SUM(counted_amount), COUNT(*)
FROM card_transactions
WHERE counts = 1
GROUP BY project_id, card_id, created_at - created_at % 86400000000, COALESCE(mcc, '');

INSERT INTO card_usage (project_id, card_id, span, bucket, mcc, spent, used_count)
SELECT project_id, card_id, 3600000000, created_at - created_at % 3600000000, COALESCE(mcc, ''),
       SUM(counted_amount), COUNT(*)
FROM card_transactions
WHERE counts = 1
GROUP BY project_id, card_id, created_at - created_at % 3600000000, COALESCE(mcc, '');

-- Adds to the day and the hour of `p_at`.
CREATE FUNCTION card_usage_add(p_project TEXT, p_card TEXT, p_at BIGINT, p_mcc TEXT,
                               p_spent BIGINT, p_count BIGINT) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO card_usage (project_id, card_id, span, bucket, mcc, spent, used_count)
    VALUES (p_project, p_card, 86400000000, p_at - p_at % 86400000000, COALESCE(p_mcc, ''), p_spent, p_count),
           (p_project, p_card, 3600000000, p_at - p_at % 3600000000, COALESCE(p_mcc, ''), p_spent, p_count)
    ON CONFLICT (project_id, card_id, span, bucket, mcc) DO UPDATE
    SET spent = card_usage.spent + excluded.spent,
        used_count = card_usage.used_count + excluded.used_count;
$$;

-- The usual change (a reversal, a clearing, an expiry) stays in its row's hour: one
-- upsert of the difference. A row moved to another hour, MCC or card (nothing in the
-- service does; tests move `created_at`) leaves the old buckets and enters the new.
CREATE FUNCTION card_usage_track() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    old_spent BIGINT := 0;
    old_count BIGINT := 0;
    new_spent BIGINT := 0;
    new_count BIGINT := 0;
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.counts = 1 THEN
        old_spent := OLD.counted_amount;
        old_count := 1;
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.counts = 1 THEN
        new_spent := NEW.counted_amount;
        new_count := 1;
    END IF;
    IF TG_OP = 'UPDATE'
       AND OLD.project_id = NEW.project_id AND OLD.card_id = NEW.card_id
       AND OLD.created_at - OLD.created_at % 3600000000 = NEW.created_at - NEW.created_at % 3600000000
       AND COALESCE(OLD.mcc, '') = COALESCE(NEW.mcc, '') THEN
        IF new_spent <> old_spent OR new_count <> old_count THEN
            PERFORM card_usage_add(NEW.project_id, NEW.card_id, NEW.created_at, NEW.mcc,
                                   new_spent - old_spent, new_count - old_count);
        END IF;
        RETURN NULL;
    END IF;
    IF old_count <> 0 THEN
        PERFORM card_usage_add(OLD.project_id, OLD.card_id, OLD.created_at, OLD.mcc,
                               -old_spent, -old_count);
    END IF;
    IF new_count <> 0 THEN
        PERFORM card_usage_add(NEW.project_id, NEW.card_id, NEW.created_at, NEW.mcc,
                               new_spent, new_count);
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER card_usage_insert AFTER INSERT ON card_transactions
FOR EACH ROW WHEN (NEW.counts = 1) EXECUTE FUNCTION card_usage_track();
CREATE TRIGGER card_usage_update AFTER UPDATE ON card_transactions
FOR EACH ROW WHEN ((OLD.counts = 1 OR NEW.counts = 1)
    AND (OLD.counts, OLD.counted_amount, OLD.created_at, OLD.mcc, OLD.card_id, OLD.project_id)
        IS DISTINCT FROM (NEW.counts, NEW.counted_amount, NEW.created_at, NEW.mcc, NEW.card_id, NEW.project_id))
EXECUTE FUNCTION card_usage_track();
CREATE TRIGGER card_usage_delete AFTER DELETE ON card_transactions
FOR EACH ROW WHEN (OLD.counts = 1) EXECUTE FUNCTION card_usage_track();
