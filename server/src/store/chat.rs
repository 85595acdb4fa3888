//! Threads, their messages and each account's daily usage ([`ChatStore`]).

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};

use super::{StoreError, StoreResult};
use crate::domain::{Channel, Role};
use crate::ids::{AgentId, ApiKeyId, IntegrationId, MessageId, ThreadId, UserId};

/// A turn's statement text from `build`, the two-message shapes built once into `two`.
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

/// Parameters a turn's new thread binds (`$1`–`$8`); its messages' follow.
pub(crate) const THREAD_PARAMS: usize = 8;

/// The insert of a turn's new thread (`$1`–`$8`) when its user's agent, read with `lock`, exists.
pub(crate) fn insert_thread_sql(lock: &str) -> String {
    format!(
        "INSERT INTO threads (id, agent_id, user_id, title, message_count, created_at, updated_at, channel) \
         SELECT $1, $2, $3, $4, $5, $6, $7, $8 \
         WHERE EXISTS (SELECT 1 FROM agents WHERE id = $2 AND user_id = $3{lock})"
    )
}

/// The `VALUES` rows of a turn's `messages` messages, the first binding from `$first` on.
pub(crate) fn message_values(first: usize, messages: usize) -> String {
    let width = super::rows::MESSAGE_PARAMS;
    let row = |n: usize| {
        let params: Vec<String> = (first + n * width..first + (n + 1) * width)
            .map(|i| format!("${i}"))
            .collect();
        format!("({})", params.join(", "))
    };
    (0..messages).map(row).collect::<Vec<_>>().join(", ")
}

/// The insert of a turn's `messages` messages (from `$first` on) into thread `$1` when it is
/// user `$user`'s, the thread read with `lock`.
pub(crate) fn insert_messages_sql(
    first: usize,
    messages: usize,
    user: usize,
    lock: &str,
) -> String {
    format!(
        "INSERT INTO messages ({}) SELECT v.* FROM (VALUES {}) AS v \
         WHERE EXISTS (SELECT 1 FROM threads WHERE id = $1 AND user_id = ${user}{lock})",
        super::rows::MESSAGE_COLUMNS,
        message_values(first, messages)
    )
}

/// Whether a turn that wrote `rows` of its `whole` was stored; a part is an error.
pub(crate) fn turn_stored(rows: u64, whole: u64) -> StoreResult<bool> {
    match rows {
        0 => Ok(false),
        n if n == whole => Ok(true),
        n => Err(StoreError::Other(anyhow::anyhow!(
            "a chat turn wrote {n} of its {whole} rows"
        ))),
    }
}

/// A message's status (docs/api.md § States and transitions), set once when stored.
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
    /// The client went away while the reply streamed (`chat::stream`), or the reply was
    /// cancelled (`POST .../cancel`).
    Cancelled,
    /// The instance shut down while the reply was generated (`chat::replies`); the text is
    /// what was generated until then.
    Interrupted,
}

impl ReplyStatus {
    pub const ALL: [Self; 4] = [
        Self::Complete,
        Self::Failed,
        Self::Cancelled,
        Self::Interrupted,
    ];

    /// The stored and wire text: `complete`, `failed` or `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Interrupted => "interrupted",
        }
    }
}

impl std::fmt::Display for ReplyStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A rating of a reply (docs/api.md § Feedback).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, sqlx::Type,
)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "TEXT", rename_all = "lowercase")]
pub enum Rating {
    Up,
    Down,
}

impl Rating {
    /// The stored and wire text: `up` or `down`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Up => "up",
            Self::Down => "down",
        }
    }
}

/// The feedback on one reply; a reply has at most one, the latest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedbackRecord {
    pub message_id: MessageId,
    pub rating: Rating,
    pub comment: Option<String>,
    /// When this rating was given.
    pub created_at: DateTime<Utc>,
}

/// What [`ChatStore::set_feedback`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeedbackWrite {
    /// The message is not in the user's thread of that agent.
    NoMessage,
    /// The message is the user's, not a reply.
    NotAReply,
    /// The same rating and comment were already stored; nothing changed.
    Unchanged,
    /// Stored, new or replacing another.
    Stored,
}

/// A conversation thread of one user with one agent.
#[derive(Debug, Clone)]
pub struct ThreadRecord {
    pub id: ThreadId,
    pub agent_id: AgentId,
    pub user_id: UserId,
    pub title: String,
    pub message_count: i64,
    /// Where the thread started, recorded when it is created.
    pub channel: Channel,
    /// Replies of the thread rated `up` and `down` (kept by the store).
    pub feedback_up: i64,
    pub feedback_down: i64,
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
    /// The API key the message was sent with; its reply's tokens count in the key's month.
    pub api_key_id: Option<ApiKeyId>,
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

/// One chat turn as it is stored ([`ChatStore::record_turns`]).
#[derive(Debug, Clone)]
pub struct TurnRecord {
    /// Created with the turn when `new_thread` is set, else one of `thread.user_id`.
    pub thread: ThreadRecord,
    pub new_thread: bool,
    /// The messages in order (user's, then reply); their `thread_id` is ignored.
    pub messages: Vec<MessageRecord>,
    /// The external conversation continued in `thread`, linked with the turn while its
    /// integration exists.
    pub channel: Option<ChannelLink>,
}

/// An integration's external conversation linked to its thread ([`TurnRecord::channel`]).
#[derive(Debug, Clone)]
pub struct ChannelLink {
    /// The integration the conversation comes through.
    pub integration_id: IntegrationId,
    /// The conversation's key within the integration (`channels::*::conversation_key`).
    pub conversation_key: String,
    pub at: DateTime<Utc>,
}

/// Which rated conversations the inbox keeps ([`InboxFilter::feedback`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeedbackFilter {
    /// At least one reply rated `up`.
    Up,
    /// At least one reply rated `down`.
    Down,
    /// At least one rated reply.
    Any,
}

/// The filters of the account's conversation inbox ([`ChatStore::inbox`]); each one set must
/// hold.
#[derive(Debug, Clone, Default)]
pub struct InboxFilter {
    pub agent_id: Option<AgentId>,
    /// Only threads of these agents (an API key bound to agents); `None`: any agent.
    pub within: Option<Vec<AgentId>>,
    pub channel: Option<Channel>,
    /// Last activity at or after this time.
    pub from: Option<DateTime<Utc>>,
    /// Last activity before this time.
    pub until: Option<DateTime<Utc>>,
    pub feedback: Option<FeedbackFilter>,
    /// Words one message of the thread must all hold, each as a word or a word's start:
    /// lower-case letters and digits only (`chat::history::search_words`).
    pub words: Vec<String>,
}

/// How a store finds the threads of an inbox search ([`InboxFilter::words`]), chosen by the
/// backend's planner from how common the words are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WordsPlan {
    /// These threads alone hold matches (a rare search): they are read by id and sorted.
    Threads(Vec<String>),
    /// The inbox's threads in order, each checked against the matches' threads, gathered once.
    Gathered,
    /// The inbox's threads in order, each one's messages checked against the matches.
    Exists,
    /// The inbox's threads in order, in growing batches, each batch's messages read and
    /// checked by [`holds_words`] (a common search: the page fills within a few batches),
    /// then [`WordsPlan::Exists`] for the rest beyond [`WALK_MESSAGES`].
    Walk,
}

/// Messages a [`WordsPlan::Walk`] reads at most before it hands the rest of the page to the
/// index.
pub const WALK_MESSAGES: u64 = 4_000;

/// Whether `text` holds every one of `words` (lower-case runs of letters and digits, as
/// `chat::history::search_words` makes them), each as a word or a word's start: `text`'s
/// words are its runs of letters and digits, compared lower-cased (docs/api.md
/// § Conversation inbox).
pub fn holds_words(text: &str, words: &[String]) -> bool {
    let mut found = vec![false; words.len()];
    let mut left = words.len();
    let mut lower = String::new();
    for token in text.split(|c: char| !c.is_alphanumeric()) {
        if token.is_empty() || left == 0 {
            continue;
        }
        lower.clear();
        lower.extend(token.chars().flat_map(char::to_lowercase));
        for (word, seen) in words.iter().zip(found.iter_mut()) {
            if !*seen && lower.starts_with(word.as_str()) {
                *seen = true;
                left -= 1;
            }
        }
    }
    left == 0
}

/// A thread as the inbox lists it, with its agent's name.
#[derive(Debug, Clone)]
pub struct InboxThread {
    pub thread: ThreadRecord,
    pub agent_name: String,
}

/// One message as an agent's conversation export writes it ([`ChatStore::export_messages`]).
#[derive(Debug, Clone)]
pub struct ExportedMessage {
    pub message: MessageRecord,
    /// Its thread's channel.
    pub channel: Channel,
    /// The reply's rating and comment, if rated.
    pub feedback: Option<(Rating, Option<String>)>,
}

/// Where an export continues: after this message (of the order thread id, time, id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportCursor {
    pub thread_id: ThreadId,
    pub at: i64,
    pub id: MessageId,
}

/// What an analytics query covers ([`ChatStore::analytics`]): the user's conversations of
/// one agent (or all, or those of `within`), from `from` to `until` (epoch ms, half-open),
/// counted per interval of `days` days (1 or 7); interval `n` starts on epoch day
/// `n * days - offset` (offset 3 makes weeks start on Mondays, epoch day 0 being a
/// Thursday).
#[derive(Debug, Clone)]
pub struct AnalyticsQuery {
    pub user_id: UserId,
    pub agent_id: Option<AgentId>,
    pub within: Option<Vec<AgentId>>,
    pub from: i64,
    pub until: i64,
    pub days: i64,
    pub offset: i64,
}

/// One interval's counts ([`ChatStore::analytics`]); intervals without any are absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AnalyticsBucket {
    /// The interval's number ([`AnalyticsQuery`]).
    pub bucket: i64,
    /// Conversations started.
    pub conversations: i64,
    pub user_messages: i64,
    pub replies: i64,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    /// Distinct people on the live channels (widget visitors, Telegram chats, Slack threads)
    /// who wrote.
    pub visitors: i64,
    pub feedback_up: i64,
    pub feedback_down: i64,
    /// Complete replies without sources, of agents with a knowledge base.
    pub unanswered: i64,
    pub failed: i64,
}

/// The user messages of an analytics period ([`ChatStore::analytics_questions`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskedQuestion {
    pub text: String,
    /// Whether the turn's reply was complete, without sources, from an agent with a
    /// knowledge base.
    pub unanswered: bool,
}

/// A half-open period of time, `[from, until)`; either end may be open (`None`).
pub type TimeRange = (Option<DateTime<Utc>>, Option<DateTime<Utc>>);

/// A keyset pagination position: the sort time and id of the last row returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub at: i64,
    pub id: String,
}

/// Persistence of conversations. Methods taking a user id are tenant-scoped.
#[async_trait]
pub trait ChatStore: Send + Sync {
    /// Creates the thread with its first message when its user's agent exists; false
    /// (nothing written) otherwise. Counted as [`ChatStore::append_message`] counts.
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
    /// Appends a message, atomically counting it on the thread and, for a reply, its chat
    /// and tokens in the owner's [`UsageDay`]; concurrent appends are all counted.
    async fn append_message(&self, message: &MessageRecord) -> StoreResult<()>;
    /// Stores turns in one transaction, each whole or not at all; answers per turn whether it
    /// was stored (false: agent or thread gone). An error or a drop leaves none or all.
    async fn record_turns(&self, turns: &[TurnRecord]) -> StoreResult<Vec<bool>>;
    /// The user's usage from day `from` (UTC) on, oldest first; days without use are absent.
    async fn usage(&self, user_id: &UserId, from: NaiveDate) -> StoreResult<Vec<UsageDay>>;
    /// Tokens (prompt + completion) of the replies sent with API key `key_id` in `month`
    /// (`YYYY-MM`, UTC).
    async fn key_usage(&self, key_id: &ApiKeyId, month: &str) -> StoreResult<u64>;
    /// The tokens of each of the user's API keys that has any in `month` (`YYYY-MM`).
    async fn key_usages(&self, user_id: &UserId, month: &str) -> StoreResult<Vec<(ApiKeyId, u64)>>;
    /// Claims the alert at `threshold` % of the user's quota `subject` (`plan` or an API
    /// key's id) for `month`: true for the one caller that claims it first, on any instance.
    async fn claim_usage_alert(
        &self,
        user_id: &UserId,
        subject: &str,
        month: &str,
        threshold: u8,
        at: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Stores `feedback` on reply `feedback.message_id` of the user's thread of the agent,
    /// replacing the reply's earlier feedback.
    async fn set_feedback(
        &self,
        user_id: &UserId,
        agent_id: &AgentId,
        thread_id: &ThreadId,
        feedback: &FeedbackRecord,
    ) -> StoreResult<FeedbackWrite>;
    /// Removes the feedback on message `message_id` of the user's thread of the agent; false
    /// when there is no such message (true whether or not it had feedback).
    async fn clear_feedback(
        &self,
        user_id: &UserId,
        agent_id: &AgentId,
        thread_id: &ThreadId,
        message_id: &MessageId,
    ) -> StoreResult<bool>;
    /// The feedback on the thread's replies, in no order.
    async fn thread_feedback(&self, thread_id: &ThreadId) -> StoreResult<Vec<FeedbackRecord>>;
    /// The user's threads of any agent that pass `filter`, by most recent activity, after
    /// `cursor`.
    async fn inbox(
        &self,
        user_id: &UserId,
        filter: &InboxFilter,
        limit: u32,
        cursor: Option<&Cursor>,
    ) -> StoreResult<Vec<InboxThread>>;
    /// Up to `limit` messages of the user's agent created in `[from, until)` (either end
    /// open), after `after`, ordered by thread id (threads in creation order), then time and
    /// id: an export reads them page by page in constant memory.
    async fn export_messages(
        &self,
        user_id: &UserId,
        agent_id: &AgentId,
        (from, until): crate::store::chat::TimeRange,
        after: Option<&ExportCursor>,
        limit: u32,
    ) -> StoreResult<Vec<ExportedMessage>>;
    /// The counts of [`AnalyticsQuery`]'s period per interval, in no order.
    async fn analytics(&self, query: &AnalyticsQuery) -> StoreResult<Vec<AnalyticsBucket>>;
    /// The stored tool calls (JSON arrays) of the period's replies with their interval, at
    /// most `limit`, newest first.
    async fn analytics_tool_calls(
        &self,
        query: &AnalyticsQuery,
        limit: u32,
    ) -> StoreResult<Vec<(i64, String)>>;
    /// The period's newest `limit` user messages, each with whether its reply went
    /// unanswered.
    async fn analytics_questions(
        &self,
        query: &AnalyticsQuery,
        limit: u32,
    ) -> StoreResult<Vec<AskedQuestion>>;
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

/// Defines the [`ChatStore`] of `$store` (`$writer` pool writes, `$reader` reads) over the
/// invoking file's chat-turn writer (`bind_message`, `store_turn`, `record_turns`).
macro_rules! chat_store {
    ($store:ident, $db:ty, $writer:ident, $reader:ident) => {
        mod shared {
            use chrono::{DateTime, NaiveDate, Utc};
            use sqlx::Row;

            use super::super::{
                rows::{message, ms, thread, MESSAGE_COLUMNS, THREAD_COLUMNS},
                row_lock, $store,
            };
            use super::{bind_message, plan_words, push_words, store_turn};
            use crate::store::chat::{holds_words, WordsPlan, WALK_MESSAGES};
            use crate::ids::{AgentId, ApiKeyId, MessageId, ThreadId, UserId};
            use crate::store::{
                AnalyticsBucket, AnalyticsQuery, AskedQuestion, ChannelLink, ChatStore, Cursor,
                ExportCursor, ExportedMessage, FeedbackFilter, FeedbackRecord, FeedbackWrite,
                InboxFilter, InboxThread, MessageRecord, StoreError, StoreResult, ThreadRecord,
                TurnRecord, UsageDay,
            };

            /// Links `link`'s conversation to `thread` ([`TurnRecord::channel`]) on `conn`.
            async fn link_channel(
                conn: &mut <$db as sqlx::Database>::Connection,
                link: &ChannelLink,
                thread: &ThreadId,
            ) -> StoreResult<()> {
                sqlx::query(&format!(
                    "INSERT INTO channel_threads (integration_id, conversation_key, thread_id, \
                     created_at) \
                     SELECT $1, $2, $3, $4 \
                     WHERE EXISTS (SELECT 1 FROM integrations WHERE id = $1{}) \
                     ON CONFLICT (integration_id, conversation_key) \
                     DO UPDATE SET thread_id = excluded.thread_id, created_at = excluded.created_at",
                    row_lock(" FOR KEY SHARE")
                ))
                .bind(&link.integration_id)
                .bind(&link.conversation_key)
                .bind(thread)
                .bind(ms(link.at))
                .execute(conn)
                .await?;
                Ok(())
            }

            /// Whether `turn` was stored (`turn_stored`); if so, links its channel on `conn`.
            pub(crate) async fn finish_turn(
                conn: &mut <$db as sqlx::Database>::Connection,
                turn: &TurnRecord,
                rows: u64,
                whole: u64,
            ) -> StoreResult<bool> {
                let stored = crate::store::chat::turn_stored(rows, whole)?;
                if let (true, Some(link)) = (stored, &turn.channel) {
                    link_channel(conn, link, &turn.thread.id).await?;
                }
                Ok(stored)
            }

            /// Pushes ` AND {column} IN (…)` of the agents `within`; none matches nothing
            /// (`IN ()` is not SQL).
            fn push_within<'a>(
                q: &mut sqlx::QueryBuilder<'a, $db>,
                column: &str,
                within: &'a [AgentId],
            ) {
                q.push(format!(" AND {column} IN ("));
                let mut ids = q.separated(", ");
                for id in within {
                    ids.push_bind(id);
                }
                if within.is_empty() {
                    ids.push("NULL");
                }
                q.push(")");
            }

            /// Pushes `WHERE` terms of `a`'s conversations (of thread alias `t`) and the period
            /// on `column`.
            fn push_scope<'a>(
                q: &mut sqlx::QueryBuilder<'a, $db>,
                a: &'a AnalyticsQuery,
                column: &str,
            ) {
                q.push(" WHERE t.user_id = ").push_bind(&a.user_id);
                if let Some(agent_id) = &a.agent_id {
                    q.push(" AND t.agent_id = ").push_bind(agent_id);
                }
                if let Some(within) = &a.within {
                    push_within(q, "t.agent_id", within);
                }
                q.push(format!(" AND {column} >= "))
                    .push_bind(a.from)
                    .push(format!(" AND {column} < "))
                    .push_bind(a.until);
            }

            /// The interval of `column` (epoch ms) in `a`'s terms.
            fn bucket(a: &AnalyticsQuery, column: &str) -> String {
                format!("(({column} / 86400000 + {}) / {})", a.offset, a.days)
            }

            /// The SQL of "the reply `r` used no knowledge though its agent has some".
            const UNANSWERED: &str = "r.role = 'assistant' AND r.status = 'complete' \
                AND r.sources IS NULL \
                AND EXISTS (SELECT 1 FROM documents d WHERE d.agent_id = t.agent_id)";

            /// The role of message `message_id` of the user's thread of the agent, if it is there.
            async fn message_role(
                pool: &sqlx::Pool<$db>,
                user_id: &UserId,
                agent_id: &AgentId,
                thread_id: &ThreadId,
                message_id: &MessageId,
            ) -> StoreResult<Option<String>> {
                let row = sqlx::query(
                    "SELECT m.role FROM messages m JOIN threads t ON t.id = m.thread_id \
                     WHERE m.id = $1 AND m.thread_id = $2 AND t.user_id = $3 AND t.agent_id = $4",
                )
                .bind(message_id)
                .bind(thread_id)
                .bind(user_id)
                .bind(agent_id)
                .fetch_optional(pool)
                .await?;
                Ok(row.map(|r| r.try_get("role")).transpose()?)
            }

            impl $store {
                /// One page of the inbox through one query, the words (if any) found as
                /// `plan` says.
                async fn inbox_page(
                    &self,
                    user_id: &UserId,
                    f: &InboxFilter,
                    plan: Option<WordsPlan>,
                    limit: u32,
                    cursor: Option<&Cursor>,
                ) -> StoreResult<Vec<InboxThread>> {
                    let mut q = sqlx::QueryBuilder::<$db>::new(format!(
                        "SELECT {THREAD_COLUMNS}, \
                         (SELECT name FROM agents WHERE agents.id = threads.agent_id) AS agent_name \
                         FROM threads WHERE "
                    ));
                    match plan {
                        None => {
                            q.push("user_id = ").push_bind(user_id);
                        }
                        Some(plan) => push_words(&mut q, user_id, &f.words, plan),
                    }
                    if let Some(agent_id) = &f.agent_id {
                        q.push(" AND agent_id = ").push_bind(agent_id);
                    }
                    if let Some(within) = &f.within {
                        push_within(&mut q, "agent_id", within);
                    }
                    if let Some(channel) = f.channel {
                        q.push(" AND channel = ").push_bind(channel);
                    }
                    if let Some(from) = f.from {
                        q.push(" AND updated_at >= ").push_bind(ms(from));
                    }
                    if let Some(until) = f.until {
                        q.push(" AND updated_at < ").push_bind(ms(until));
                    }
                    if let Some(feedback) = f.feedback {
                        // The sum is the predicate of the partial index of rated threads.
                        q.push(" AND feedback_up + feedback_down > 0");
                        match feedback {
                            FeedbackFilter::Up => q.push(" AND feedback_up > 0"),
                            FeedbackFilter::Down => q.push(" AND feedback_down > 0"),
                            FeedbackFilter::Any => &mut q,
                        };
                    }
                    if let Some(c) = cursor {
                        // A range on the index's column first, so a deep page seeks to it.
                        q.push(" AND updated_at <= ")
                            .push_bind(c.at)
                            .push(" AND (updated_at < ")
                            .push_bind(c.at)
                            .push(" OR id < ")
                            .push_bind(c.id.clone())
                            .push(")");
                    }
                    q.push(" ORDER BY updated_at DESC, id DESC LIMIT ")
                        .push_bind(i64::from(limit));
                    let rows = q.build().fetch_all(&self.$reader).await?;
                    rows.iter()
                        .map(|r| {
                            Ok(InboxThread {
                                thread: thread(r)?,
                                agent_name: r.try_get("agent_name")?,
                            })
                        })
                        .collect::<Result<_, sqlx::Error>>()
                        .map_err(Into::into)
                }

                /// The inbox's threads in order without the words, in batches growing from
                /// the page's size, each batch's messages read and checked by
                /// [`holds_words`] until the page is full. Before a batch would take the
                /// messages read past [`WALK_MESSAGES`], the rest of the page is searched
                /// through the index instead ([`WordsPlan::Exists`]).
                async fn inbox_walk(
                    &self,
                    user_id: &UserId,
                    f: &InboxFilter,
                    limit: u32,
                    cursor: Option<&Cursor>,
                ) -> StoreResult<Vec<InboxThread>> {
                    let unfiltered = InboxFilter {
                        words: Vec::new(),
                        ..f.clone()
                    };
                    let mut found = Vec::new();
                    let mut cursor = cursor.cloned();
                    let (mut batch, mut read) = (limit.max(16), 0u64);
                    while found.len() < limit as usize {
                        let threads = self
                            .inbox_page(user_id, &unfiltered, None, batch, cursor.as_ref())
                            .await?;
                        let messages: u64 =
                            threads.iter().map(|t| t.thread.message_count.max(0) as u64).sum();
                        read += messages;
                        if read > WALK_MESSAGES {
                            let rest = limit - found.len() as u32;
                            let more = self
                                .inbox_page(user_id, f, Some(WordsPlan::Exists), rest, cursor.as_ref())
                                .await?;
                            found.extend(more);
                            break;
                        }
                        let Some(last) = threads.last() else { break };
                        cursor = Some(Cursor {
                            at: ms(last.thread.updated_at),
                            id: last.thread.id.as_str().to_string(),
                        });
                        let ended = threads.len() < batch as usize;
                        let mut q = sqlx::QueryBuilder::<$db>::new(
                            "SELECT thread_id, content FROM messages WHERE thread_id IN (",
                        );
                        let mut ids = q.separated(", ");
                        for t in &threads {
                            ids.push_bind(t.thread.id.as_str());
                        }
                        q.push(")");
                        let mut holding = std::collections::HashSet::new();
                        for row in q.build().fetch_all(&self.$reader).await? {
                            let id: String = row.try_get("thread_id")?;
                            if !holding.contains(&id)
                                && holds_words(row.try_get("content")?, &f.words)
                            {
                                holding.insert(id);
                            }
                        }
                        let room = limit as usize - found.len();
                        found.extend(
                            threads
                                .into_iter()
                                .filter(|t| holding.contains(t.thread.id.as_str()))
                                .take(room),
                        );
                        if ended {
                            break;
                        }
                        batch = (batch * 2).min(512);
                    }
                    Ok(found)
                }
            }

            #[async_trait::async_trait]
            impl ChatStore for $store {
                async fn create_thread(
                    &self,
                    t: &ThreadRecord,
                    first: &MessageRecord,
                ) -> StoreResult<bool> {
                    let turn = TurnRecord {
                        thread: t.clone(),
                        new_thread: true,
                        messages: vec![first.clone()],
                        channel: None,
                    };
                    store_turn(&self.$writer, &turn).await
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
                        "INSERT INTO messages ({MESSAGE_COLUMNS}) VALUES {}",
                        crate::store::chat::message_values(1, 1)
                    );
                    bind_message(sqlx::query(&sql), m, &m.thread_id)
                        .execute(&self.$writer)
                        .await?;
                    Ok(())
                }

                async fn record_turns(&self, turns: &[TurnRecord]) -> StoreResult<Vec<bool>> {
                    super::record_turns(self, turns).await
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

                async fn key_usage(&self, key_id: &ApiKeyId, month: &str) -> StoreResult<u64> {
                    let used: Option<i64> = sqlx::query_scalar(
                        "SELECT prompt_tokens + completion_tokens FROM api_key_usage \
                         WHERE key_id = $1 AND month = $2",
                    )
                    .bind(key_id)
                    .bind(month)
                    .fetch_optional(&self.$reader)
                    .await?;
                    Ok(used.unwrap_or(0).max(0) as u64)
                }

                async fn key_usages(
                    &self,
                    user_id: &UserId,
                    month: &str,
                ) -> StoreResult<Vec<(ApiKeyId, u64)>> {
                    let rows: Vec<(ApiKeyId, i64)> = sqlx::query_as(
                        "SELECT u.key_id, u.prompt_tokens + u.completion_tokens FROM api_key_usage u \
                         JOIN api_keys k ON k.id = u.key_id WHERE k.user_id = $1 AND u.month = $2",
                    )
                    .bind(user_id)
                    .bind(month)
                    .fetch_all(&self.$reader)
                    .await?;
                    Ok(rows.into_iter().map(|(k, n)| (k, n.max(0) as u64)).collect())
                }

                async fn claim_usage_alert(
                    &self,
                    user_id: &UserId,
                    subject: &str,
                    month: &str,
                    threshold: u8,
                    at: DateTime<Utc>,
                ) -> StoreResult<bool> {
                    let done = sqlx::query(
                        "INSERT INTO usage_alerts (user_id, subject, month, threshold, created_at) \
                         VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                    )
                    .bind(user_id)
                    .bind(subject)
                    .bind(month)
                    .bind(i64::from(threshold))
                    .bind(ms(at))
                    .execute(&self.$writer)
                    .await?;
                    Ok(done.rows_affected() == 1)
                }

                async fn set_feedback(
                    &self,
                    user_id: &UserId,
                    agent_id: &AgentId,
                    thread_id: &ThreadId,
                    f: &FeedbackRecord,
                ) -> StoreResult<FeedbackWrite> {
                    let role = message_role(&self.$writer, user_id, agent_id, thread_id, &f.message_id).await?;
                    match role.as_deref() {
                        None => return Ok(FeedbackWrite::NoMessage),
                        Some("assistant") => {}
                        Some(_) => return Ok(FeedbackWrite::NotAReply),
                    }
                    // The SELECT's WHERE also keeps SQLite from reading ON CONFLICT as a join's.
                    let done = sqlx::query(
                        "INSERT INTO message_feedback (message_id, thread_id, rating, comment, created_at) \
                         SELECT $1, $2, $3, $4, $5 \
                         WHERE EXISTS (SELECT 1 FROM messages WHERE id = $1 AND thread_id = $2) \
                         ON CONFLICT (message_id) DO UPDATE SET rating = excluded.rating, \
                         comment = excluded.comment, created_at = excluded.created_at \
                         WHERE message_feedback.rating <> excluded.rating \
                         OR message_feedback.comment IS DISTINCT FROM excluded.comment",
                    )
                    .bind(&f.message_id)
                    .bind(thread_id)
                    .bind(f.rating.as_str())
                    .bind(&f.comment)
                    .bind(ms(f.created_at))
                    .execute(&self.$writer)
                    .await?;
                    Ok(if done.rows_affected() == 1 {
                        FeedbackWrite::Stored
                    } else {
                        FeedbackWrite::Unchanged
                    })
                }

                async fn clear_feedback(
                    &self,
                    user_id: &UserId,
                    agent_id: &AgentId,
                    thread_id: &ThreadId,
                    message_id: &MessageId,
                ) -> StoreResult<bool> {
                    if message_role(&self.$writer, user_id, agent_id, thread_id, message_id)
                        .await?
                        .is_none()
                    {
                        return Ok(false);
                    }
                    sqlx::query("DELETE FROM message_feedback WHERE message_id = $1 AND thread_id = $2")
                        .bind(message_id)
                        .bind(thread_id)
                        .execute(&self.$writer)
                        .await?;
                    Ok(true)
                }

                async fn thread_feedback(
                    &self,
                    thread_id: &ThreadId,
                ) -> StoreResult<Vec<FeedbackRecord>> {
                    let rows = sqlx::query(
                        "SELECT message_id, rating, comment, created_at FROM message_feedback \
                         WHERE thread_id = $1",
                    )
                    .bind(thread_id)
                    .fetch_all(&self.$reader)
                    .await?;
                    rows.iter()
                        .map(|r| {
                            Ok(FeedbackRecord {
                                message_id: r.try_get("message_id")?,
                                rating: r.try_get("rating")?,
                                comment: r.try_get("comment")?,
                                created_at: crate::store::from_millis(r.try_get("created_at")?),
                            })
                        })
                        .collect()
                }

                async fn inbox(
                    &self,
                    user_id: &UserId,
                    f: &InboxFilter,
                    limit: u32,
                    cursor: Option<&Cursor>,
                ) -> StoreResult<Vec<InboxThread>> {
                    let plan = match f.words.is_empty() {
                        true => None,
                        false => Some(plan_words(&self.$reader, &f.words).await?),
                    };
                    match plan {
                        Some(WordsPlan::Walk) => self.inbox_walk(user_id, f, limit, cursor).await,
                        plan => self.inbox_page(user_id, f, plan, limit, cursor).await,
                    }
                }
                async fn export_messages(
                    &self,
                    user_id: &UserId,
                    agent_id: &AgentId,
                    (from, until): crate::store::chat::TimeRange,
                    after: Option<&ExportCursor>,
                    limit: u32,
                ) -> StoreResult<Vec<ExportedMessage>> {
                    let columns: Vec<String> = MESSAGE_COLUMNS
                        .split(',')
                        .map(|c| format!("m.{}", c.trim()))
                        .collect();
                    // Threads in id order (the index on agent and id), each one's messages in
                    // the order of `messages_thread`: no sort, and the limit stops the scan.
                    let mut q = sqlx::QueryBuilder::<$db>::new(format!(
                        "SELECT {}, t.channel AS thread_channel, f.rating AS feedback_rating, \
                         f.comment AS feedback_comment \
                         FROM threads t JOIN messages m ON m.thread_id = t.id \
                         LEFT JOIN message_feedback f ON f.message_id = m.id \
                         WHERE t.agent_id = ",
                        columns.join(", ")
                    ));
                    q.push_bind(agent_id).push(" AND t.user_id = ").push_bind(user_id);
                    if let Some(from) = from {
                        q.push(" AND m.created_at >= ").push_bind(ms(from));
                    }
                    if let Some(until) = until {
                        q.push(" AND m.created_at < ").push_bind(ms(until));
                    }
                    if let Some(c) = after {
                        q.push(" AND t.id >= ")
                            .push_bind(&c.thread_id)
                            .push(" AND (t.id > ")
                            .push_bind(&c.thread_id)
                            .push(" OR m.created_at > ")
                            .push_bind(c.at)
                            .push(" OR (m.created_at = ")
                            .push_bind(c.at)
                            .push(" AND m.id > ")
                            .push_bind(&c.id)
                            .push("))");
                    }
                    q.push(" ORDER BY t.id, m.created_at, m.id LIMIT ")
                        .push_bind(i64::from(limit));
                    let rows = q.build().fetch_all(&self.$reader).await?;
                    rows.iter()
                        .map(|r| {
                            let rating: Option<crate::store::Rating> = r.try_get("feedback_rating")?;
                            Ok(ExportedMessage {
                                message: message(r)?,
                                channel: r.try_get("thread_channel")?,
                                feedback: rating
                                    .map(|rating| {
                                        let comment: Option<String> = r.try_get("feedback_comment")?;
                                        Ok::<_, sqlx::Error>((rating, comment))
                                    })
                                    .transpose()?,
                            })
                        })
                        .collect::<Result<_, sqlx::Error>>()
                        .map_err(Into::into)
                }

                async fn analytics(&self, a: &AnalyticsQuery) -> StoreResult<Vec<AnalyticsBucket>> {
                    type Buckets = std::collections::BTreeMap<i64, AnalyticsBucket>;
                    fn at(buckets: &mut Buckets, b: i64) -> &mut AnalyticsBucket {
                        buckets.entry(b).or_insert_with(|| AnalyticsBucket {
                            bucket: b,
                            ..Default::default()
                        })
                    }
                    let mut buckets = Buckets::new();
                    // Messages: counts, tokens, failures and replies without knowledge.
                    let mut q = sqlx::QueryBuilder::<$db>::new(format!(
                        "SELECT {} AS b, \
                         CAST(SUM(CASE WHEN r.role = 'user' THEN 1 ELSE 0 END) AS BIGINT) AS asked, \
                         CAST(SUM(CASE WHEN r.role = 'assistant' THEN 1 ELSE 0 END) AS BIGINT) AS replies, \
                         CAST(SUM(COALESCE(r.prompt_tokens, 0)) AS BIGINT) AS prompt, \
                         CAST(SUM(COALESCE(r.completion_tokens, 0)) AS BIGINT) AS completion, \
                         CAST(SUM(CASE WHEN r.status = 'failed' THEN 1 ELSE 0 END) AS BIGINT) AS failed, \
                         CAST(SUM(CASE WHEN {UNANSWERED} THEN 1 ELSE 0 END) AS BIGINT) AS unanswered \
                         FROM messages r JOIN threads t ON t.id = r.thread_id",
                        bucket(a, "r.created_at")
                    ));
                    push_scope(&mut q, a, "r.created_at");
                    q.push(" GROUP BY b");
                    for row in q.build().fetch_all(&self.$reader).await? {
                        let e = at(&mut buckets, row.try_get("b")?);
                        e.user_messages = row.try_get("asked")?;
                        e.replies = row.try_get("replies")?;
                        e.prompt_tokens = row.try_get("prompt")?;
                        e.completion_tokens = row.try_get("completion")?;
                        e.failed = row.try_get("failed")?;
                        e.unanswered = row.try_get("unanswered")?;
                    }
                    // Conversations started.
                    let mut q = sqlx::QueryBuilder::<$db>::new(format!(
                        "SELECT {} AS b, COUNT(*) AS n FROM threads t",
                        bucket(a, "t.created_at")
                    ));
                    push_scope(&mut q, a, "t.created_at");
                    q.push(" GROUP BY b");
                    for row in q.build().fetch_all(&self.$reader).await? {
                        at(&mut buckets, row.try_get("b")?).conversations = row.try_get("n")?;
                    }
                    // Ratings given.
                    let mut q = sqlx::QueryBuilder::<$db>::new(format!(
                        "SELECT {} AS b, \
                         CAST(SUM(CASE WHEN f.rating = 'up' THEN 1 ELSE 0 END) AS BIGINT) AS up, \
                         CAST(SUM(CASE WHEN f.rating = 'down' THEN 1 ELSE 0 END) AS BIGINT) AS down \
                         FROM message_feedback f JOIN threads t ON t.id = f.thread_id",
                        bucket(a, "f.created_at")
                    ));
                    push_scope(&mut q, a, "f.created_at");
                    q.push(" GROUP BY b");
                    for row in q.build().fetch_all(&self.$reader).await? {
                        let e = at(&mut buckets, row.try_get("b")?);
                        e.feedback_up = row.try_get("up")?;
                        e.feedback_down = row.try_get("down")?;
                    }
                    // People on the live channels: their channel conversation, or the thread.
                    let mut q = sqlx::QueryBuilder::<$db>::new(format!(
                        "SELECT {} AS b, COUNT(DISTINCT COALESCE(c.integration_id || ':' || c.conversation_key, t.id)) AS n \
                         FROM messages r JOIN threads t ON t.id = r.thread_id \
                         LEFT JOIN channel_threads c ON c.thread_id = t.id",
                        bucket(a, "r.created_at")
                    ));
                    push_scope(&mut q, a, "r.created_at");
                    q.push(" AND r.role = 'user' AND t.channel IN ('widget', 'telegram', 'slack') GROUP BY b");
                    for row in q.build().fetch_all(&self.$reader).await? {
                        at(&mut buckets, row.try_get("b")?).visitors = row.try_get("n")?;
                    }
                    Ok(buckets.into_values().collect())
                }

                async fn analytics_tool_calls(
                    &self,
                    a: &AnalyticsQuery,
                    limit: u32,
                ) -> StoreResult<Vec<(i64, String)>> {
                    let mut q = sqlx::QueryBuilder::<$db>::new(format!(
                        "SELECT {} AS b, r.tool_calls FROM messages r JOIN threads t ON t.id = r.thread_id",
                        bucket(a, "r.created_at")
                    ));
                    push_scope(&mut q, a, "r.created_at");
                    q.push(" AND r.tool_calls IS NOT NULL ORDER BY r.created_at DESC LIMIT ")
                        .push_bind(i64::from(limit));
                    let rows = q.build().fetch_all(&self.$reader).await?;
                    rows.iter()
                        .map(|r| Ok((r.try_get("b")?, r.try_get("tool_calls")?)))
                        .collect::<Result<_, sqlx::Error>>()
                        .map_err(Into::into)
                }

                async fn analytics_questions(
                    &self,
                    a: &AnalyticsQuery,
                    limit: u32,
                ) -> StoreResult<Vec<AskedQuestion>> {
                    // Each user message with the turn's reply: the thread's next reply.
                    let mut q = sqlx::QueryBuilder::<$db>::new(format!(
                        "SELECT u.content, EXISTS (SELECT 1 FROM messages r WHERE r.thread_id = u.thread_id \
                         AND r.id = (SELECT n.id FROM messages n WHERE n.thread_id = u.thread_id \
                         AND n.role = 'assistant' AND (n.created_at > u.created_at \
                         OR (n.created_at = u.created_at AND n.id > u.id)) \
                         ORDER BY n.created_at, n.id LIMIT 1) AND {UNANSWERED}) AS unanswered \
                         FROM messages u JOIN threads t ON t.id = u.thread_id"
                    ));
                    push_scope(&mut q, a, "u.created_at");
                    q.push(" AND u.role = 'user' ORDER BY u.created_at DESC LIMIT ")
                        .push_bind(i64::from(limit));
                    let rows = q.build().fetch_all(&self.$reader).await?;
                    rows.iter()
                        .map(|r| {
                            Ok(AskedQuestion {
                                text: r.try_get("content")?,
                                unanswered: r.try_get("unanswered")?,
                            })
                        })
                        .collect::<Result<_, sqlx::Error>>()
                        .map_err(Into::into)
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
        // The CHECK list of `messages.status` (migrations/sqlite/0018_interrupted.sql).
        let statuses: Vec<&str> = ReplyStatus::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(statuses, ["complete", "failed", "cancelled", "interrupted"]);
        for s in ReplyStatus::ALL {
            let json = serde_json::to_value(s).unwrap();
            assert_eq!(json, s.as_str());
            assert_eq!(serde_json::from_value::<ReplyStatus>(json).unwrap(), s);
            assert_eq!(s.to_string(), s.as_str());
        }
    }

    #[test]
    fn words_are_found_as_words_or_word_starts_without_case() {
        let words = |w: &[&str]| w.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        let text = "The Borrow-checker said: don't move `values` (Ünïcode 42x)!";
        assert!(holds_words(text, &words(&["borrow"])));
        assert!(holds_words(text, &words(&["check", "valu"])));
        assert!(holds_words(text, &words(&["ünï", "42"])));
        assert!(holds_words(text, &words(&["t", "don"])));
        assert!(!holds_words(text, &words(&["orrow"])), "inside a word");
        assert!(!holds_words(text, &words(&["borrowchecker"])));
        assert!(
            !holds_words(text, &words(&["borrow", "missing"])),
            "every word"
        );
        assert!(!holds_words("", &words(&["a"])));
    }
}
