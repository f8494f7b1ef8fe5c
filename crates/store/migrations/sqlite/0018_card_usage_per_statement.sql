-- PostgreSQL keeps card usage per inserting statement from here (its migration 18).
-- SQLite has no statement triggers with transition tables; its row trigger runs inside
-- the writer's own process and stays.
SELECT 1;
