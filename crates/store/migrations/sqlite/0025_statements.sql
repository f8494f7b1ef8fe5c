-- Statements (CONTRACT §17) sum an account's entries before an instant and list them
-- over a month: (account, time) finds both by a range, and the amount in the index
-- answers the sums without reading the rows.
CREATE INDEX entries_account_time ON entries(account_id, created_at, amount);
