-- Key rotation: a key may be kept valid for a grace period after a new one is issued.
-- A key is valid while it is not revoked and expires_at is NULL (no expiry) or later
-- than now; a key past expires_at is refused like an unknown key.
ALTER TABLE api_keys ADD COLUMN expires_at BIGINT;
