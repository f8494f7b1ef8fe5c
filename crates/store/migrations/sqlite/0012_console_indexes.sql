-- Measured at full scale (100,000 cards, 1,000,000 card transactions, a tenth on one
-- card): three console reads scanned what an index can answer.

-- The overview counts cards per status: from the index alone, not the wide card rows,
-- and in status order, so the count needs no sort (at 10,000 cards on SQLite: 2.4 ms with
-- the table, 0.7 ms with this index). A viewer's count of one project scans the same
-- index for its project.
CREATE INDEX cards_status_project ON cards(status, project_id);

-- The overview's chart reads a day of authorizations per minute: every column it needs
-- is in the index, so a day of rows is not a day of table lookups.
DROP INDEX card_transactions_created;
CREATE INDEX card_transactions_created ON card_transactions(created_at, tx_kind, status, project_id);

-- A card's open holds: only transactions still holding funds are in it, so a card with a
-- long history does not scan that history to find its few holds.
CREATE INDEX card_transactions_open_holds ON card_transactions(card_id, created_at, id) WHERE held > 0;
