-- What each card's transactions count toward its limits, per UTC day and MCC
-- (`card_txs::usage`). An authorization on a card with limits summed every counted
-- transaction in its windows, so its cost grew with the card's history (an all-time
-- limit read the whole of it); with these rows a window reads its whole UTC days here
-- and only the partial day at its start row by row, which keeps calendar windows in any
-- time zone and rolling windows exact. Days are UTC so a card's time zone can change
-- without rewriting anything.
--
-- Kept by triggers, in the statement that changes a transaction, so no writer (the
-- authorization path, expiry, close, a console seed, a test moving `created_at`) can
-- forget them and SQLite pays no extra statement hand-over. `verify-ledger` compares
-- them with the transactions (`UsageDiffers`).
CREATE TABLE card_usage_days (
    project_id TEXT NOT NULL,
    card_id TEXT NOT NULL,
    -- Start of the UTC day, microseconds since the epoch.
    day BIGINT NOT NULL,
    -- '' for a transaction without an MCC (no MCC-scoped limit matches it).
    mcc TEXT NOT NULL,
    spent BIGINT NOT NULL,
    used_count BIGINT NOT NULL,
    PRIMARY KEY (project_id, card_id, day, mcc)
) WITHOUT ROWID;

INSERT INTO card_usage_days (project_id, card_id, day, mcc, spent, used_count)
SELECT project_id, card_id, created_at - created_at % 86400000000, COALESCE(mcc, ''),
       SUM(counted_amount), COUNT(*)
FROM card_transactions
WHERE counts = 1
GROUP BY project_id, card_id, created_at - created_at % 86400000000, COALESCE(mcc, '');

CREATE TRIGGER card_usage_days_insert AFTER INSERT ON card_transactions
WHEN NEW.counts = 1
BEGIN
    INSERT INTO card_usage_days (project_id, card_id, day, mcc, spent, used_count)
    VALUES (NEW.project_id, NEW.card_id, NEW.created_at - NEW.created_at % 86400000000,
            COALESCE(NEW.mcc, ''), NEW.counted_amount, 1)
    ON CONFLICT (project_id, card_id, day, mcc) DO UPDATE
    SET spent = spent + excluded.spent, used_count = used_count + excluded.used_count;
END;

-- The usual change (a reversal, a clearing, an expiry) stays in its row's day: one
-- upsert of the difference.
CREATE TRIGGER card_usage_days_update AFTER UPDATE OF counts, counted_amount, created_at, mcc, card_id, project_id
ON card_transactions
WHEN (OLD.counts = 1 OR NEW.counts = 1)
 AND OLD.project_id = NEW.project_id AND OLD.card_id = NEW.card_id
 AND OLD.created_at - OLD.created_at % 86400000000 = NEW.created_at - NEW.created_at % 86400000000
 AND COALESCE(OLD.mcc, '') = COALESCE(NEW.mcc, '')
 AND (OLD.counts <> NEW.counts OR OLD.counted_amount <> NEW.counted_amount)
BEGIN
    INSERT INTO card_usage_days (project_id, card_id, day, mcc, spent, used_count)
    VALUES (NEW.project_id, NEW.card_id, NEW.created_at - NEW.created_at % 86400000000,
            COALESCE(NEW.mcc, ''),
            (CASE WHEN NEW.counts = 1 THEN NEW.counted_amount ELSE 0 END)
              - (CASE WHEN OLD.counts = 1 THEN OLD.counted_amount ELSE 0 END),
            (CASE WHEN NEW.counts = 1 THEN 1 ELSE 0 END) - (CASE WHEN OLD.counts = 1 THEN 1 ELSE 0 END))
    ON CONFLICT (project_id, card_id, day, mcc) DO UPDATE
    SET spent = spent + excluded.spent, used_count = used_count + excluded.used_count;
END;

-- A row moved to another day, MCC or card (nothing in the service does; tests move
-- `created_at`): out of the old day, into the new.
CREATE TRIGGER card_usage_days_move AFTER UPDATE OF counts, counted_amount, created_at, mcc, card_id, project_id
ON card_transactions
WHEN (OLD.counts = 1 OR NEW.counts = 1)
 AND NOT (OLD.project_id = NEW.project_id AND OLD.card_id = NEW.card_id
  AND OLD.created_at - OLD.created_at % 86400000000 = NEW.created_at - NEW.created_at % 86400000000
  AND COALESCE(OLD.mcc, '') = COALESCE(NEW.mcc, ''))
BEGIN
    INSERT INTO card_usage_days (project_id, card_id, day, mcc, spent, used_count)
    VALUES (OLD.project_id, OLD.card_id, OLD.created_at - OLD.created_at % 86400000000,
            COALESCE(OLD.mcc, ''),
            -(CASE WHEN OLD.counts = 1 THEN OLD.counted_amount ELSE 0 END),
            -(CASE WHEN OLD.counts = 1 THEN 1 ELSE 0 END))
    ON CONFLICT (project_id, card_id, day, mcc) DO UPDATE
    SET spent = spent + excluded.spent, used_count = used_count + excluded.used_count;
    INSERT INTO card_usage_days (project_id, card_id, day, mcc, spent, used_count)
    VALUES (NEW.project_id, NEW.card_id, NEW.created_at - NEW.created_at % 86400000000,
            COALESCE(NEW.mcc, ''),
            CASE WHEN NEW.counts = 1 THEN NEW.counted_amount ELSE 0 END,
            CASE WHEN NEW.counts = 1 THEN 1 ELSE 0 END)
    ON CONFLICT (project_id, card_id, day, mcc) DO UPDATE
    SET spent = spent + excluded.spent, used_count = used_count + excluded.used_count;
END;

CREATE TRIGGER card_usage_days_delete AFTER DELETE ON card_transactions
WHEN OLD.counts = 1
BEGIN
    INSERT INTO card_usage_days (project_id, card_id, day, mcc, spent, used_count)
    VALUES (OLD.project_id, OLD.card_id, OLD.created_at - OLD.created_at % 86400000000,
            COALESCE(OLD.mcc, ''), -OLD.counted_amount, -1)
    ON CONFLICT (project_id, card_id, day, mcc) DO UPDATE
    SET spent = spent + excluded.spent, used_count = used_count + excluded.used_count;
END;
