-- `orders_card` repeats the start of `orders_card_created` (migration 10), which answers
-- every lookup by card as well: one index less to write for every order written.
-- (PostgreSQL also leaves room on the orders' pages here; SQLite has no such setting.)
DROP INDEX orders_card;
