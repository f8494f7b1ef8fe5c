-- PostgreSQL drops the foreign keys of transfers, entries and events here; SQLite keeps
-- them (its checks run in process, and dropping one means rebuilding the table).
SELECT 1;
