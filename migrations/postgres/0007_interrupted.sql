-- A reply still generating when its instance's shutdown grace period ended is stored as
-- `interrupted`, with the text generated so far (docs/api.md § Drains).
ALTER TABLE messages DROP CONSTRAINT messages_status_check;
ALTER TABLE messages ADD CONSTRAINT messages_status_check
    CHECK (status IN ('complete', 'failed', 'cancelled', 'interrupted'));
