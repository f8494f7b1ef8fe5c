-- Projects created before the in-flight account existed get one, so topups and
-- withdrawals work for them too.
INSERT INTO accounts (id, project_id, kind, card_id, currency, balance, allow_negative, created_at)
SELECT substr(md5(random()::text || clock_timestamp()::text || p.id), 1, 24), p.id, 'in_flight', NULL, 'usdt', 0, 0, p.created_at
FROM projects p
WHERE NOT EXISTS (
    SELECT 1 FROM accounts a WHERE a.project_id = p.id AND a.kind = 'in_flight' AND a.card_id IS NULL
);
