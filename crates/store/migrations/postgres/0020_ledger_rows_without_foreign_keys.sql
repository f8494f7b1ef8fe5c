-- The hot writers' inserts no longer pay a referential check per row (docs/money.md,
-- "Foreign keys"): each writer reads or locks what its rows point at in the same
-- transaction, nothing ever deletes projects, accounts or transfers, and verify-ledger
-- reports any row whose target is missing.
ALTER TABLE transfers DROP CONSTRAINT IF EXISTS transfers_project_id_fkey;
ALTER TABLE entries DROP CONSTRAINT IF EXISTS entries_transfer_id_fkey;
ALTER TABLE entries DROP CONSTRAINT IF EXISTS entries_account_id_fkey;
ALTER TABLE events DROP CONSTRAINT IF EXISTS events_project_id_fkey;
