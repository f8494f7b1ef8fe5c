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
-- Kept by triggers, in the statement that changes a transaction, so no writer (the
-- authorization path, expiry, close, a console seed, a test moving `created_at`) can
-- forget them and SQLite pays no extra statement hand-over. `verify-ledger` compares
-- them with the transactions (`UsageDiffers`).
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
) WITHOUT ROWID;

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

CREATE TRIGGER card_usage_insert AFTER INSERT ON card_transactions
WHEN NEW.counts = 1
BEGIN
    INSERT INTO card_usage (project_id, card_id, span, bucket, mcc, spent, used_count)
    VALUES (NEW.project_id, NEW.card_id, 86400000000, NEW.created_at - NEW.created_at % 86400000000,
            COALESCE(NEW.mcc, ''), NEW.counted_amount, 1)
    ON CONFLICT (project_id, card_id, span, bucket, mcc) DO UPDATE
    SET spent = spent + excluded.spent, used_count = used_count + excluded.used_count;
    INSERT INTO card_usage (project_id, card_id, span, bucket, mcc, spent, used_count)
    VALUES (NEW.project_id, NEW.card_id, 3600000000, NEW.created_at - NEW.created_at % 3600000000,
            COALESCE(NEW.mcc, ''), NEW.counted_amount, 1)
    ON CONFLICT (project_id, card_id, span, bucket, mcc) DO UPDATE
    SET spent = spent + excluded.spent, used_count = used_count + excluded.used_count;
END;

-- The usual change (a reversal, a clearing, an expiry) stays in its row's hour: one
-- upsert of the difference per span.
CREATE TRIGGER card_usage_update AFTER UPDATE OF counts, counted_amount, created_at, mcc, card_id, project_id
ON card_transactions
WHEN (OLD.counts = 1 OR NEW.counts = 1)
 AND OLD.project_id = NEW.project_id AND OLD.card_id = NEW.card_id
 AND OLD.created_at - OLD.created_at % 3600000000 = NEW.created_at - NEW.created_at % 3600000000
 AND COALESCE(OLD.mcc, '') = COALESCE(NEW.mcc, '')
 AND (OLD.counts <> NEW.counts OR OLD.counted_amount <> NEW.counted_amount)
BEGIN
    INSERT INTO card_usage (project_id, card_id, span, bucket, mcc, spent, used_count)
    VALUES (NEW.project_id, NEW.card_id, 86400000000, NEW.created_at - NEW.created_at % 86400000000,
            COALESCE(NEW.mcc, ''), (CASE WHEN NEW.counts = 1 THEN NEW.counted_amount ELSE 0 END) - (CASE WHEN OLD.counts = 1 THEN OLD.counted_amount ELSE 0 END), (CASE WHEN NEW.counts = 1 THEN 1 ELSE 0 END) - (CASE WHEN OLD.counts = 1 THEN 1 ELSE 0 END))
    ON CONFLICT (project_id, card_id, span, bucket, mcc) DO UPDATE
    SET spent = spent + excluded.spent, used_count = used_count + excluded.used_count;
    INSERT INTO card_usage (project_id, card_id, span, bucket, mcc, spent, used_count)
    VALUES (NEW.project_id, NEW.card_id, 3600000000, NEW.created_at - NEW.created_at % 3600000000,
            COALESCE(NEW.mcc, ''), (CASE WHEN NEW.counts = 1 THEN NEW.counted_amount ELSE 0 END) - (CASE WHEN OLD.counts = 1 THEN OLD.counted_amount ELSE 0 END), (CASE WHEN NEW.counts = 1 THEN 1 ELSE 0 END) - (CASE WHEN OLD.counts = 1 THEN 1 ELSE 0 END))
    ON CONFLICT (project_id, card_id, span, bucket, mcc) DO UPDATE
    SET spent = spent + excluded.spent, used_count = used_count + excluded.used_count;
END;

-- A row moved to another hour, MCC or card (nothing in the service does; tests move
-- `created_at`): out of the old buckets, into the new.
CREATE TRIGGER card_usage_move AFTER UPDATE OF counts, counted_amount, created_at, mcc, card_id, project_id
ON card_transactions
WHEN (OLD.counts = 1 OR NEW.counts = 1)
 AND NOT (OLD.project_id = NEW.project_id AND OLD.card_id = NEW.card_id
 AND OLD.created_at - OLD.created_at % 3600000000 = NEW.created_at - NEW.created_at % 3600000000
 AND COALESCE(OLD.mcc, '') = COALESCE(NEW.mcc, ''))
BEGIN
    INSERT INTO card_usage (project_id, card_id, span, bucket, mcc, spent, used_count)
    VALUES (OLD.project_id, OLD.card_id, 86400000000, OLD.created_at - OLD.created_at % 86400000000,
            COALESCE(OLD.mcc, ''), -(CASE WHEN OLD.counts = 1 THEN OLD.counted_amount ELSE 0 END), -(CASE WHEN OLD.counts = 1 THEN 1 ELSE 0 END))
    ON CONFLICT (project_id, card_id, span, bucket, mcc) DO UPDATE
    SET spent = spent + excluded.spent, used_count = used_count + excluded.used_count;
    INSERT INTO card_usage (project_id, card_id, span, bucket, mcc, spent, used_count)
    VALUES (OLD.project_id, OLD.card_id, 3600000000, OLD.created_at - OLD.created_at % 3600000000,
            COALESCE(OLD.mcc, ''), -(CASE WHEN OLD.counts = 1 THEN OLD.counted_amount ELSE 0 END), -(CASE WHEN OLD.counts = 1 THEN 1 ELSE 0 END))
    ON CONFLICT (project_id, card_id, span, bucket, mcc) DO UPDATE
    SET spent = spent + excluded.spent, used_count = used_count + excluded.used_count;
    INSERT INTO card_usage (project_id, card_id, span, bucket, mcc, spent, used_count)
    VALUES (NEW.project_id, NEW.card_id, 86400000000, NEW.created_at - NEW.created_at % 86400000000,
            COALESCE(NEW.mcc, ''), CASE WHEN NEW.counts = 1 THEN NEW.counted_amount ELSE 0 END, CASE WHEN NEW.counts = 1 THEN 1 ELSE 0 END)
    ON CONFLICT (project_id, card_id, span, bucket, mcc) DO UPDATE
    SET spent = spent + excluded.spent, used_count = used_count + excluded.used_count;
    INSERT INTO card_usage (project_id, card_id, span, bucket, mcc, spent, used_count)
    VALUES (NEW.project_id, NEW.card_id, 3600000000, NEW.created_at - NEW.created_at % 3600000000,
            COALESCE(NEW.mcc, ''), CASE WHEN NEW.counts = 1 THEN NEW.counted_amount ELSE 0 END, CASE WHEN NEW.counts = 1 THEN 1 ELSE 0 END)
    ON CONFLICT (project_id, card_id, span, bucket, mcc) DO UPDATE
    SET spent = spent + excluded.spent, used_count = used_count + excluded.used_count;
END;

CREATE TRIGGER card_usage_delete AFTER DELETE ON card_transactions
WHEN OLD.counts = 1
BEGIN
    INSERT INTO card_usage (project_id, card_id, span, bucket, mcc, spent, used_count)
    VALUES (OLD.project_id, OLD.card_id, 86400000000, OLD.created_at - OLD.created_at % 86400000000,
            COALESCE(OLD.mcc, ''), -OLD.counted_amount, -1)
    ON CONFLICT (project_id, card_id, span, bucket, mcc) DO UPDATE
    SET spent = spent + excluded.spent, used_count = used_count + excluded.used_count;
    INSERT INTO card_usage (project_id, card_id, span, bucket, mcc, spent, used_count)
    VALUES (OLD.project_id, OLD.card_id, 3600000000, OLD.created_at - OLD.created_at % 3600000000,
            COALESCE(OLD.mcc, ''), -OLD.counted_amount, -1)
    ON CONFLICT (project_id, card_id, span, bucket, mcc) DO UPDATE
    SET spent = spent + excluded.spent, used_count = used_count + excluded.used_count;
END;
