-- An order is written three times or more after its insert (a worker's lease, each
-- step, its end). `orders_card` repeats the start of `orders_card_created` (migration
-- 10), which answers every lookup by card as well: one index less to write for every
-- insert and every update that cannot stay on its page.
DROP INDEX orders_card;
-- A lease changes no indexed column, so with room left on its page PostgreSQL updates
-- the row in place of the page (a HOT update) and writes no index. Filled to the brim,
-- each lease rewrote every index of the row. Applies to pages written from now on.
ALTER TABLE orders SET (fillfactor = 70);
