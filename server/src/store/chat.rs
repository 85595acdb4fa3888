//! Threads, their messages and each account's daily usage ([`ChatStore`]).

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};

use super::StoreResult;
use crate::domain::Role;
use crate::ids::{AgentId, IntegrationId, MessageId, ThreadId, UserId};

/// The statement text of one turn ([`ChatStore::record_turns`]) with `messages` messages,
/// made by a backend's `build`; the common two-message shapes are built once into `two`.
pub(crate) fn turn_statement(
    two: &'static std::sync::OnceLock<[String; 2]>,
    build: fn(bool, usize) -> String,
    new_thread: bool,
    messages: usize,
) -> std::borrow::Cow<'static, str> {
    if messages == 2 {
        let shapes = two.get_or_init(|| [build(false, 2), build(true, 2)]);
        std::borrow::Cow::Borrowed(shapes[usize::from(new_thread)].as_str())
    } else {
        std::borrow::Cow::Owned(build(new_thread, messages))
    }
}

/// A message's status (docs/api.md § States and transitions), set once when stored:
/// `complete` (a user message, a finished reply), `failed` (the provider broke off) or
/// `cancelled` (the client left). Stored and answered as its text ([`ReplyStatus::as_str`]).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, sqlx::Type,
)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "TEXT", rename_all = "lowercase")]
pub enum ReplyStatus {
    /// A user message, or a reply the model finished (`chat`).
    Complete,
    /// The provider failed or broke the reply off (`chat`); `error` says why.
    Failed,
    /// The client went away while the reply streamed (`chat::stream`).
    Cancelled,
}

impl ReplyStatus {
    /// Every status, in the order of docs/api.md § States and transitions.
    pub const ALL: [Self; 3] = [Self::Complete, Self::Failed, Self::Cancelled];

    /// The stored and wire text: `complete`, `failed` or `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }
}

impl std::fmt::Display for ReplyStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A conversation thread of one user with one agent.
#[derive(Debug, Clone)]
pub struct ThreadRecord {
    pub id: ThreadId,
    pub agent_id: AgentId,
    pub user_id: UserId,
    pub title: String,
    pub message_count: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// One message of a thread.
#[derive(Debug, Clone)]
pub struct MessageRecord {
    pub id: MessageId,
    pub thread_id: ThreadId,
    pub role: Role,
    pub content: String,
    pub model: Option<String>,
    pub prompt_tokens: Option<i64>,
    pub completion_tokens: Option<i64>,
    /// JSON array of the reply's sources.
    pub sources: Option<String>,
    pub latency_ms: Option<i64>,
    pub status: ReplyStatus,
    pub error: Option<String>,
    pub created_at: DateTime<Utc>,
    /// JSON array of the reply's tool calls (docs/api.md § Tools); `None` when none.
    pub tool_calls: Option<String>,
}

/// One account's use of chat on one UTC day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageDay {
    pub day: NaiveDate,
    /// Chat replies (each chat request makes one, whatever its outcome).
    pub chats: i64,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
}

/// One chat turn as it is stored ([`ChatStore::record_turns`]): the user's message and the
/// reply, in a thread that the turn creates or one that exists.
#[derive(Debug, Clone)]
pub struct TurnRecord {
    /// The turn's thread: created with the turn when `new_thread` is set, else an existing
    /// thread of `thread.user_id`.
    pub thread: ThreadRecord,
    /// Whether the thread is created with this turn.
    pub new_thread: bool,
    /// The messages in order (user's, then reply); their `thread_id` is ignored.
    pub messages: Vec<MessageRecord>,
    /// The external conversation (Telegram chat, Slack thread, widget visitor) continued in
    /// `thread` from this turn on; linked in the same transaction, replacing an earlier link,
    /// when the integration still exists.
    pub channel: Option<ChannelLink>,
}

/// An integration's external conversation linked to its thread ([`TurnRecord::channel`]).
#[derive(Debug, Clone)]
pub struct ChannelLink {
    /// The integration the conversation comes through.
    pub integration_id: IntegrationId,
    /// The conversation's key within the integration (`channels::*::conversation_key`).
    pub conversation_key: String,
    /// When the link is made.
    pub at: DateTime<Utc>,
}

/// A keyset pagination position: the sort time and id of the last row returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub at: i64,
    pub id: String,
}

/// Persistence of conversations. Methods taking a user id are tenant-scoped.
#[async_trait]
pub trait ChatStore: Send + Sync {
    /// Creates the thread with its first message (whose `thread_id` is ignored) when its
    /// agent exists and belongs to its user; false (nothing written) otherwise, never a
    /// foreign-key error. The first message counts as [`ChatStore::append_message`] counts.
    async fn create_thread(
        &self,
        thread: &ThreadRecord,
        first: &MessageRecord,
    ) -> StoreResult<bool>;
    async fn thread(
        &self,
        user_id: &UserId,
        agent_id: &AgentId,
        thread_id: &ThreadId,
    ) -> StoreResult<Option<ThreadRecord>>;
    /// Threads by most recent activity, after `cursor`.
    async fn list_threads(
        &self,
        user_id: &UserId,
        agent_id: &AgentId,
        limit: u32,
        cursor: Option<&Cursor>,
    ) -> StoreResult<Vec<ThreadRecord>>;
    async fn delete_thread(
        &self,
        user_id: &UserId,
        agent_id: &AgentId,
        thread_id: &ThreadId,
    ) -> StoreResult<bool>;
    /// Appends a message, and in the same atomic step grows the thread's `message_count` by
    /// one and moves `updated_at` to the later of itself and the message's; an assistant
    /// message also adds one chat and its tokens (absent: 0) to its owner's [`UsageDay`]
    /// (UTC), which outlives the thread. Concurrent appends are all counted.
    async fn append_message(&self, message: &MessageRecord) -> StoreResult<()>;
    /// Stores several chat turns in one transaction (a group commit), each whole or not at
    /// all: a new thread as [`ChatStore::create_thread`] does, or messages of an existing
    /// thread of `thread.user_id`, counted as [`ChatStore::append_message`] counts. Answers
    /// per turn whether it was stored (false: agent or thread gone). An error, or a call
    /// dropped part-way, leaves nothing of any turn, or all of them.
    async fn record_turns(&self, turns: &[TurnRecord]) -> StoreResult<Vec<bool>>;
    /// The user's usage from day `from` (UTC) on, oldest first; days without use are absent.
    async fn usage(&self, user_id: &UserId, from: NaiveDate) -> StoreResult<Vec<UsageDay>>;
    /// Messages oldest first, after `cursor`.
    async fn list_messages(
        &self,
        thread_id: &ThreadId,
        limit: u32,
        cursor: Option<&Cursor>,
    ) -> StoreResult<Vec<MessageRecord>>;
    /// The newest `limit` messages, returned oldest first (prompt history).
    async fn recent_messages(
        &self,
        thread_id: &ThreadId,
        limit: u32,
    ) -> StoreResult<Vec<MessageRecord>>;
}

/// Defines, in a private module `shared` of the invoking backend file, the [`ChatStore`]
/// implementation of `$store` (`$writer` pool writes, `$reader` reads) and `link_channel`
/// for the chat-turn writer. The invoking file supplies `bind_message` (from
/// [`crate::store::rows::turn_binders`]), `own_create_thread` and `own_record_turns` with
/// the trait methods' signatures; its `rows` module gives the row mappers.
macro_rules! chat_store {
    ($store:ident, $db:ty, $writer:ident, $reader:ident) => {
        mod shared {
            use chrono::NaiveDate;
            use sqlx::Row;

            use super::super::{
                rows::{message, ms, thread, MESSAGE_COLUMNS, THREAD_COLUMNS},
                $store, KEY_SHARE,
            };
            use super::bind_message;
            use crate::ids::{AgentId, ThreadId, UserId};
            use crate::store::{
                ChannelLink, ChatStore, Cursor, MessageRecord, StoreError, StoreResult, ThreadRecord,
                TurnRecord, UsageDay,
            };

            /// Links `link`'s external conversation to `thread` on `conn` (in its
            /// transaction) ([`TurnRecord::channel`]), replacing an earlier link; nothing
            /// when the integration is gone.
            pub(crate) async fn link_channel(
                conn: &mut <$db as sqlx::Database>::Connection,
                link: &ChannelLink,
                thread: &ThreadId,
            ) -> StoreResult<()> {
                sqlx::query(&format!(
                    "INSERT INTO channel_threads (integration_id, conversation_key, thread_id, \
                     created_at) \
                     SELECT $1, $2, $3, $4 \
                     WHERE EXISTS (SELECT 1 FROM integrations WHERE id = $1{KEY_SHARE}) \
                     ON CONFLICT (integration_id, conversation_key) \
                     DO UPDATE SET thread_id = excluded.thread_id, created_at = excluded.created_at"
                ))
                .bind(&link.integration_id)
                .bind(&link.conversation_key)
                .bind(thread)
                .bind(ms(link.at))
                .execute(conn)
                .await?;
                Ok(())
            }

            #[async_trait::async_trait]
            impl ChatStore for $store {
                async fn create_thread(
                    &self,
                    t: &ThreadRecord,
                    first: &MessageRecord,
                ) -> StoreResult<bool> {
                    self.own_create_thread(t, first).await
                }

                async fn thread(
                    &self,
                    user_id: &UserId,
                    agent_id: &AgentId,
                    thread_id: &ThreadId,
                ) -> StoreResult<Option<ThreadRecord>> {
                    let row = sqlx::query(&format!(
                        "SELECT {THREAD_COLUMNS} FROM threads WHERE user_id = $1 AND agent_id = $2 AND id = $3"
                    ))
                    .bind(user_id)
                    .bind(agent_id)
                    .bind(thread_id)
                    .fetch_optional(&self.$reader)
                    .await?;
                    Ok(row.as_ref().map(thread).transpose()?)
                }

                async fn list_threads(
                    &self,
                    user_id: &UserId,
                    agent_id: &AgentId,
                    limit: u32,
                    cursor: Option<&Cursor>,
                ) -> StoreResult<Vec<ThreadRecord>> {
                    let (at, id) =
                        cursor.map_or((i64::MAX, String::new()), |c| (c.at, c.id.clone()));
                    let rows = sqlx::query(&format!(
                        "SELECT {THREAD_COLUMNS} FROM threads WHERE user_id = $1 AND agent_id = $2 \
                         AND (updated_at < $3 OR (updated_at = $4 AND id < $5) OR $6 = '') \
                         ORDER BY updated_at DESC, id DESC LIMIT $7"
                    ))
                    .bind(user_id)
                    .bind(agent_id)
                    .bind(at)
                    .bind(at)
                    .bind(&id)
                    .bind(&id)
                    .bind(i64::from(limit))
                    .fetch_all(&self.$reader)
                    .await?;
                    Ok(rows.iter().map(thread).collect::<Result<_, _>>()?)
                }

                async fn delete_thread(
                    &self,
                    user_id: &UserId,
                    agent_id: &AgentId,
                    thread_id: &ThreadId,
                ) -> StoreResult<bool> {
                    let done = sqlx::query(
                        "DELETE FROM threads WHERE user_id = $1 AND agent_id = $2 AND id = $3",
                    )
                    .bind(user_id)
                    .bind(agent_id)
                    .bind(thread_id)
                    .execute(&self.$writer)
                    .await?;
                    Ok(done.rows_affected() == 1)
                }

                async fn append_message(&self, m: &MessageRecord) -> StoreResult<()> {
                    // The thread's count and activity time and the owner's usage are kept by the
                    // trigger `messages_count`, inside this statement.
                    let sql = format!(
                        "INSERT INTO messages ({MESSAGE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"
                    );
                    bind_message(sqlx::query(&sql), m, &m.thread_id)
                        .execute(&self.$writer)
                        .await?;
                    Ok(())
                }

                async fn record_turns(&self, turns: &[TurnRecord]) -> StoreResult<Vec<bool>> {
                    self.own_record_turns(turns).await
                }

                async fn usage(
                    &self,
                    user_id: &UserId,
                    from: NaiveDate,
                ) -> StoreResult<Vec<UsageDay>> {
                    let rows = sqlx::query(
                        "SELECT day, chats, prompt_tokens, completion_tokens FROM usage_daily \
                         WHERE user_id = $1 AND day >= $2 ORDER BY day",
                    )
                    .bind(user_id)
                    .bind(from.format("%Y-%m-%d").to_string())
                    .fetch_all(&self.$reader)
                    .await?;
                    rows.iter()
                        .map(|r| {
                            let day: String = r.try_get("day")?;
                            Ok(UsageDay {
                                day: NaiveDate::parse_from_str(&day, "%Y-%m-%d")
                                    .map_err(|e| StoreError::Other(e.into()))?,
                                chats: r.try_get("chats")?,
                                prompt_tokens: r.try_get("prompt_tokens")?,
                                completion_tokens: r.try_get("completion_tokens")?,
                            })
                        })
                        .collect()
                }

                async fn list_messages(
                    &self,
                    thread_id: &ThreadId,
                    limit: u32,
                    cursor: Option<&Cursor>,
                ) -> StoreResult<Vec<MessageRecord>> {
                    let (at, id) =
                        cursor.map_or((i64::MIN, String::new()), |c| (c.at, c.id.clone()));
                    let rows = sqlx::query(&format!(
                        "SELECT {MESSAGE_COLUMNS} FROM messages WHERE thread_id = $1 \
                         AND (created_at > $2 OR (created_at = $3 AND id > $4)) ORDER BY created_at, id LIMIT $5"
                    ))
                    .bind(thread_id)
                    .bind(at)
                    .bind(at)
                    .bind(&id)
                    .bind(i64::from(limit))
                    .fetch_all(&self.$reader)
                    .await?;
                    Ok(rows.iter().map(message).collect::<Result<_, _>>()?)
                }

                async fn recent_messages(
                    &self,
                    thread_id: &ThreadId,
                    limit: u32,
                ) -> StoreResult<Vec<MessageRecord>> {
                    let rows = sqlx::query(&format!(
                        "SELECT {MESSAGE_COLUMNS} FROM messages WHERE thread_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2"
                    ))
                    .bind(thread_id)
                    .bind(i64::from(limit))
                    .fetch_all(&self.$reader)
                    .await?;
                    let mut messages: Vec<MessageRecord> =
                        rows.iter().map(message).collect::<Result<_, _>>()?;
                    messages.reverse();
                    Ok(messages)
                }
            }
        }
    };
}
pub(crate) use chat_store;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_statuses_are_the_stored_and_wire_text() {
        // The CHECK list of `messages.status` (migrations/sqlite/0002_agents_chat.sql).
        let statuses: Vec<&str> = ReplyStatus::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(statuses, ["complete", "failed", "cancelled"]);
        for s in ReplyStatus::ALL {
            let json = serde_json::to_value(s).unwrap();
            assert_eq!(json, s.as_str());
            assert_eq!(serde_json::from_value::<ReplyStatus>(json).unwrap(), s);
            assert_eq!(s.to_string(), s.as_str());
        }
    }
}
