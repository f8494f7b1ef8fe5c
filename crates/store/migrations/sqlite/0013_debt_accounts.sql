-- Each project gets a debt account: what it owes when a real network's clearing takes
-- more than the card and the master balance hold (docs/money.md, Shortfalls). It may
-- go negative; its balance is minus the debt.
INSERT INTO accounts (id, project_id, kind, card_id, currency, balance, allow_negative, created_at)
SELECT lower(hex(randomblob(12))), p.id, 'debt', NULL, 'usdt', 0, 1, p.created_at
FROM projects p
WHERE NOT EXISTS (
    SELECT 1 FROM accounts a WHERE a.project_id = p.id AND a.kind = 'debt' AND a.card_id IS NULL
);
