-- Ratings of assistant replies (docs/api.md § Feedback): one per reply, the latest wins.

CREATE TABLE message_feedback (
    message_id TEXT PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,
    thread_id  TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    rating     TEXT NOT NULL CHECK (rating IN ('up', 'down')),
    comment    TEXT,
    created_at INTEGER NOT NULL
);
CREATE INDEX message_feedback_thread ON message_feedback (thread_id);
