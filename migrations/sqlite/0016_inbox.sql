-- The account's conversation inbox (docs/api.md § Conversation inbox): where each thread
-- started, its replies' ratings counted on it, and its messages' words searchable.

-- Threads from before this migration that a live channel continues take that channel's
-- name; the others cannot be told apart and stay `api`.
ALTER TABLE threads ADD COLUMN channel TEXT NOT NULL DEFAULT 'api'
    CHECK (channel IN ('api', 'dashboard', 'widget', 'telegram', 'slack', 'openai', 'mcp'));
UPDATE threads SET channel = (
    SELECT CASE i.provider_code WHEN 'website' THEN 'widget' ELSE i.provider_code END
    FROM channel_threads c JOIN integrations i ON i.id = c.integration_id
    WHERE c.thread_id = threads.id AND i.provider_code IN ('website', 'telegram', 'slack')
    LIMIT 1)
WHERE id IN (SELECT c.thread_id FROM channel_threads c JOIN integrations i ON i.id = c.integration_id
             WHERE i.provider_code IN ('website', 'telegram', 'slack'));

-- Replies rated up and down, kept by the triggers below.
ALTER TABLE threads ADD COLUMN feedback_up INTEGER NOT NULL DEFAULT 0;
ALTER TABLE threads ADD COLUMN feedback_down INTEGER NOT NULL DEFAULT 0;
UPDATE threads SET
    feedback_up = (SELECT count(*) FROM message_feedback f WHERE f.thread_id = threads.id AND f.rating = 'up'),
    feedback_down = (SELECT count(*) FROM message_feedback f WHERE f.thread_id = threads.id AND f.rating = 'down')
WHERE id IN (SELECT thread_id FROM message_feedback);

CREATE TRIGGER message_feedback_count_ai AFTER INSERT ON message_feedback
BEGIN
    UPDATE threads SET feedback_up = feedback_up + (NEW.rating = 'up'),
                       feedback_down = feedback_down + (NEW.rating = 'down')
    WHERE id = NEW.thread_id;
END;
CREATE TRIGGER message_feedback_count_au AFTER UPDATE OF rating ON message_feedback
WHEN OLD.rating <> NEW.rating
BEGIN
    UPDATE threads SET feedback_up = feedback_up + (NEW.rating = 'up') - (OLD.rating = 'up'),
                       feedback_down = feedback_down + (NEW.rating = 'down') - (OLD.rating = 'down')
    WHERE id = NEW.thread_id;
END;
CREATE TRIGGER message_feedback_count_ad AFTER DELETE ON message_feedback
BEGIN
    UPDATE threads SET feedback_up = feedback_up - (OLD.rating = 'up'),
                       feedback_down = feedback_down - (OLD.rating = 'down')
    WHERE id = OLD.thread_id;
END;

-- The inbox reads an account's threads newest activity first (the table's key, `id`,
-- ends every index of a WITHOUT ROWID table, so ties are ordered too); the rated ones
-- have their own, small index for the `feedback` filter.
CREATE INDEX threads_user_activity ON threads (user_id, updated_at);
CREATE INDEX threads_user_rated ON threads (user_id, updated_at)
    WHERE feedback_up + feedback_down > 0;

-- The messages' words (https://sqlite.org/fts5.html, external content): the `q` filter.
-- It asks only which messages hold a word (or a word's start), never where: `detail=none`
-- keeps no positions and `columnsize=0` no lengths, so the index holds what the search
-- reads and no more. Accents are kept, as PostgreSQL's `simple` configuration keeps them.
CREATE VIRTUAL TABLE messages_fts USING fts5(
    content, content = 'messages', content_rowid = 'rowid',
    tokenize = 'unicode61 remove_diacritics 0', detail = none, columnsize = 0
);
INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');
CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages
BEGIN
    INSERT INTO messages_fts (rowid, content) VALUES (NEW.rowid, NEW.content);
END;
CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages
BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', OLD.rowid, OLD.content);
END;

-- An agent's threads in id (creation) order: an export walks them, with each one's messages.
-- Neither column ever changes, so a chat turn never rewrites this index.
CREATE INDEX threads_agent_thread ON threads (agent_id);
