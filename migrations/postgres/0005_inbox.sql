-- The account's conversation inbox (docs/api.md § Conversation inbox): where each thread
-- started, its replies' ratings counted on it, and its messages' words searchable (sqlite 0016).

ALTER TABLE threads ADD COLUMN channel TEXT NOT NULL DEFAULT 'api'
    CHECK (channel IN ('api', 'dashboard', 'widget', 'telegram', 'slack', 'openai', 'mcp'));
UPDATE threads t SET channel = CASE i.provider_code WHEN 'website' THEN 'widget' ELSE i.provider_code END
FROM channel_threads c JOIN integrations i ON i.id = c.integration_id
WHERE c.thread_id = t.id AND i.provider_code IN ('website', 'telegram', 'slack');

ALTER TABLE threads ADD COLUMN feedback_up BIGINT NOT NULL DEFAULT 0;
ALTER TABLE threads ADD COLUMN feedback_down BIGINT NOT NULL DEFAULT 0;
UPDATE threads t SET
    feedback_up = (SELECT count(*) FROM message_feedback f WHERE f.thread_id = t.id AND f.rating = 'up'),
    feedback_down = (SELECT count(*) FROM message_feedback f WHERE f.thread_id = t.id AND f.rating = 'down')
WHERE t.id IN (SELECT thread_id FROM message_feedback);

CREATE FUNCTION message_feedback_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE threads SET feedback_up = feedback_up - (OLD.rating = 'up')::int,
                           feedback_down = feedback_down - (OLD.rating = 'down')::int
        WHERE id = OLD.thread_id;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        UPDATE threads SET feedback_up = feedback_up + (NEW.rating = 'up')::int,
                           feedback_down = feedback_down + (NEW.rating = 'down')::int
        WHERE id = NEW.thread_id;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER message_feedback_count AFTER INSERT OR DELETE OR UPDATE OF rating ON message_feedback
    FOR EACH ROW EXECUTE FUNCTION message_feedback_count();

CREATE INDEX threads_user_activity ON threads (user_id, updated_at DESC, id DESC);
CREATE INDEX threads_user_rated ON threads (user_id, updated_at DESC, id DESC)
    WHERE feedback_up + feedback_down > 0;

-- Words of the messages, as the `simple` configuration splits them (no stemming, any
-- language): the `q` filter.
CREATE INDEX messages_words ON messages USING GIN (to_tsvector('simple', content));

-- An agent's threads in id (creation) order: an export walks them, with each one's messages.
-- Neither column ever changes, so a chat turn never rewrites this index.
CREATE INDEX threads_agent_thread ON threads (agent_id, id);
