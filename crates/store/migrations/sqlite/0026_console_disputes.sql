-- The console's disputes list, unfiltered across projects, is newest first: keyset
-- paging needs (created_at, id) on its own (the other indexes lead with project or
-- status).
CREATE INDEX disputes_created ON disputes(created_at, id);
