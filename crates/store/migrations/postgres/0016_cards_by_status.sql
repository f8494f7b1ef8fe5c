-- The console's cards list filtered by status (`/console/cards?status=frozen`) reads its
-- page in order from here. Without it SQLite walked every card newest first and tested
-- each one's status: with 2% of 100,000 cards frozen, 13.5 ms a page on an idle
-- machine and 33 ms at p50 (252 ms at p99) beside other work (docs/benchmarks.md).
CREATE INDEX cards_status_created ON cards(status, created_at, id);
