//! [`crate::store::ChatStore`] on PostgreSQL: the chat-turn writer, one statement per turn,
//! or two for a whole batch of turns.

use super::{rows::MESSAGE_COLUMNS, PgStore};
use crate::store::chat::{
    insert_messages_sql, insert_thread_sql, message_values, turn_stored, THREAD_PARAMS,
};
use crate::ids::UserId;
use crate::store::{chat::WordsPlan, MessageRecord, StoreResult, TurnRecord};
use std::collections::HashSet;

crate::store::rows::turn_binders!(sqlx::Postgres);

/// How to find the threads holding `words`: always [`WordsPlan::Exists`], whose statistics
/// PostgreSQL plans with ([`push_words`]).
pub(super) async fn plan_words(_pool: &sqlx::PgPool, _words: &[String]) -> StoreResult<WordsPlan> {
    Ok(WordsPlan::Exists)
}

/// Pushes "the thread is user `user_id`'s and one of its messages holds all `words`, each as
/// a word or a word's start", through the index `messages_words` (PostgreSQL's text search with the
/// `simple` configuration; the words hold only letters and digits, so need no escaping).
/// As a correlated `EXISTS`, PostgreSQL's statistics choose between the index's matches (a
/// rare search) and the threads in the inbox's order, each one's messages checked until the
/// page is full (a common one); `_plan` is always [`plan_words`]'.
pub(super) fn push_words<'a>(
    q: &mut sqlx::QueryBuilder<'a, sqlx::Postgres>,
    user_id: &'a UserId,
    words: &[String],
    _plan: WordsPlan,
) {
    let query: Vec<String> = words.iter().map(|w| format!("{w}:*")).collect();
    q.push("user_id = ").push_bind(user_id).push(
        " AND EXISTS (SELECT 1 FROM messages m WHERE m.thread_id = threads.id \
         AND to_tsvector('simple', m.content) @@ to_tsquery('simple', ",
    )
    .push_bind(query.join(" & "))
    .push("))");
}

/// The one statement of a turn (the extended protocol takes one per query), reading the
/// agent or thread `FOR KEY SHARE`.
fn turn_sql(new_thread: bool, messages: usize) -> std::borrow::Cow<'static, str> {
    static TWO_MESSAGES: std::sync::OnceLock<[String; 2]> = std::sync::OnceLock::new();
    crate::store::chat::turn_statement(&TWO_MESSAGES, build_turn_sql, new_thread, messages)
}

/// The text of [`turn_sql`].
fn build_turn_sql(new_thread: bool, messages: usize) -> String {
    if new_thread {
        format!(
            "WITH thread AS ({} RETURNING id) \
             INSERT INTO messages ({MESSAGE_COLUMNS}) SELECT v.* FROM thread, (VALUES {}) AS v",
            insert_thread_sql(" FOR KEY SHARE"),
            message_values(THREAD_PARAMS + 1, messages)
        )
    } else {
        insert_messages_sql(3, messages, 2, " FOR KEY SHARE")
    }
}

/// Runs `turn`'s statement: the rows it wrote, or `None` when it is `alone` and its agent
/// went away meanwhile (a foreign-key violation).
async fn turn_rows<'e>(
    executor: impl sqlx::PgExecutor<'e>,
    turn: &TurnRecord,
    alone: bool,
) -> StoreResult<Option<u64>> {
    let sql = turn_sql(turn.new_thread, turn.messages.len());
    match turn_query(&sql, turn).execute(executor).await {
        Ok(done) => Ok(Some(done.rows_affected())),
        Err(sqlx::Error::Database(db)) if alone && db.is_foreign_key_violation() => Ok(None),
        Err(err) => Err(err.into()),
    }
}

/// Stores `turn` alone through `pool`, its statement atomic by itself.
async fn store_turn(pool: &sqlx::PgPool, turn: &TurnRecord) -> StoreResult<bool> {
    match turn_rows(pool, turn, true).await? {
        Some(rows) => turn_stored(rows, turn.messages.len() as u64),
        None => Ok(false),
    }
}

/// Stores `turns` in `tx`, one statement per turn, one commit.
async fn turns_in_transaction(
    mut tx: sqlx::Transaction<'static, sqlx::Postgres>,
    turns: &[TurnRecord],
) -> StoreResult<Vec<bool>> {
    let mut stored = Vec::with_capacity(turns.len());
    for turn in turns {
        let Some(rows) = turn_rows(&mut *tx, turn, turns.len() == 1).await? else {
            return Ok(vec![false]);
        };
        stored.push(shared::finish_turn(&mut tx, turn, rows, turn.messages.len() as u64).await?);
    }
    tx.commit().await?;
    Ok(stored)
}

/// The fewest turns a batch stores in two statements ([`batch_in_transaction`]); a smaller
/// batch takes a statement per turn ([`turns_in_transaction`]), which costs PostgreSQL less
/// for so few (bench/HISTORY.md).
const UNNESTED_FROM: usize = 4;

/// The insert of a batch's new threads, each one's columns an array (`UNNEST`), each
/// thread written when its user's agent exists, read `FOR KEY SHARE`.
const BATCH_THREADS_SQL: &str = "INSERT INTO threads \
     (id, agent_id, user_id, title, message_count, created_at, updated_at, channel) \
     SELECT v.* FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::int8[], \
     $6::int8[], $7::int8[], $8::text[]) \
     AS v(id, agent_id, user_id, title, message_count, created_at, updated_at, channel) \
     WHERE EXISTS (SELECT 1 FROM agents a WHERE a.id = v.agent_id AND a.user_id = v.user_id \
     FOR KEY SHARE)";

/// The array type of each of [`MESSAGE_COLUMNS`], in order, as a batch binds them.
const MESSAGE_ARRAY_TYPES: [&str; crate::store::rows::MESSAGE_PARAMS] = [
    "text", "text", "text", "text", "text", "int8", "int8", "text", "int8", "text", "text",
    "int8", "text", "text",
];

/// The insert of a batch's messages: [`MESSAGE_COLUMNS`] as arrays, then each message's
/// thread owner; a message is written when its thread is that user's (read `FOR KEY
/// SHARE`), and the statement answers the id of each one written.
fn batch_messages_sql() -> &'static str {
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SQL.get_or_init(|| {
        let arrays: Vec<String> = MESSAGE_ARRAY_TYPES
            .iter()
            .enumerate()
            .map(|(i, ty)| format!("${}::{ty}[]", i + 1))
            .collect();
        let owner = MESSAGE_ARRAY_TYPES.len() + 1;
        let selected: Vec<String> = MESSAGE_COLUMNS
            .split(',')
            .map(|c| format!("v.{}", c.trim()))
            .collect();
        format!(
            "INSERT INTO messages ({MESSAGE_COLUMNS}) SELECT {} \
             FROM UNNEST({}, ${owner}::text[]) AS v({MESSAGE_COLUMNS}, owner) \
             WHERE EXISTS (SELECT 1 FROM threads t WHERE t.id = v.thread_id \
             AND t.user_id = v.owner FOR KEY SHARE) RETURNING id",
            selected.join(", "),
            arrays.join(", ")
        )
    })
}

/// Stores the batch `turns` in `tx` in two statements whatever their number: the new
/// threads, then every message, each column bound as one array
/// (<https://www.postgresql.org/docs/current/functions-array.html>, `unnest` of several
/// arrays); then the channel links of the turns stored, one commit. A turn is stored when
/// all its messages were written (they share one check, so it is all or none).
async fn batch_in_transaction(
    mut tx: sqlx::Transaction<'static, sqlx::Postgres>,
    turns: &[TurnRecord],
) -> StoreResult<Vec<bool>> {
    use crate::store::to_millis as ms;
    let threads: Vec<&crate::store::ThreadRecord> = turns
        .iter()
        .filter(|t| t.new_thread)
        .map(|t| &t.thread)
        .collect();
    if !threads.is_empty() {
        let column = |f: fn(&crate::store::ThreadRecord) -> &str| -> Vec<&str> {
            threads.iter().map(|t| f(t)).collect()
        };
        let number = |f: fn(&crate::store::ThreadRecord) -> i64| -> Vec<i64> {
            threads.iter().map(|t| f(t)).collect()
        };
        sqlx::query(BATCH_THREADS_SQL)
            .bind(column(|t| t.id.as_str()))
            .bind(column(|t| t.agent_id.as_str()))
            .bind(column(|t| t.user_id.as_str()))
            .bind(column(|t| t.title.as_str()))
            .bind(number(|t| t.message_count))
            .bind(number(|t| ms(t.created_at)))
            .bind(number(|t| ms(t.updated_at)))
            .bind(column(|t| t.channel.as_str()))
            .execute(&mut *tx)
            .await?;
    }
    let messages: Vec<(&MessageRecord, &crate::store::ThreadRecord)> = turns
        .iter()
        .flat_map(|t| t.messages.iter().map(move |m| (m, &t.thread)))
        .collect();
    let text = |f: fn(&MessageRecord) -> &str| -> Vec<&str> {
        messages.iter().map(|(m, _)| f(m)).collect()
    };
    let optional = |f: fn(&MessageRecord) -> Option<&str>| -> Vec<Option<&str>> {
        messages.iter().map(|(m, _)| f(m)).collect()
    };
    let number = |f: fn(&MessageRecord) -> Option<i64>| -> Vec<Option<i64>> {
        messages.iter().map(|(m, _)| f(m)).collect()
    };
    let written: Vec<String> = sqlx::query_scalar(batch_messages_sql())
        .bind(text(|m| m.id.as_str()))
        .bind(messages.iter().map(|(_, t)| t.id.as_str()).collect::<Vec<_>>())
        .bind(text(|m| m.role.as_str()))
        .bind(text(|m| m.content.as_str()))
        .bind(optional(|m| m.model.as_deref()))
        .bind(number(|m| m.prompt_tokens))
        .bind(number(|m| m.completion_tokens))
        .bind(optional(|m| m.sources.as_deref()))
        .bind(number(|m| m.latency_ms))
        .bind(text(|m| m.status.as_str()))
        .bind(optional(|m| m.error.as_deref()))
        .bind(number(|m| Some(ms(m.created_at))))
        .bind(optional(|m| m.tool_calls.as_deref()))
        .bind(optional(|m| m.api_key_id.as_ref().map(|k| k.as_str())))
        .bind(messages.iter().map(|(_, t)| t.user_id.as_str()).collect::<Vec<_>>())
        .fetch_all(&mut *tx)
        .await?;
    let written: HashSet<String> = written.into_iter().collect();
    let mut stored = Vec::with_capacity(turns.len());
    for turn in turns {
        let expected = turn.messages.len() as u64;
        let rows = turn
            .messages
            .iter()
            .filter(|m| written.contains(m.id.as_str()))
            .count() as u64;
        stored.push(shared::finish_turn(&mut tx, turn, rows, expected).await?);
    }
    tx.commit().await?;
    Ok(stored)
}

crate::store::chat::chat_store!(PgStore, sqlx::Postgres, pool, pool);

/// [`crate::store::ChatStore::record_turns`]: a turn alone in one statement, a batch of
/// [`UNNESTED_FROM`] or more in two ([`batch_in_transaction`]), through the turns' own
/// connections.
async fn record_turns(store: &PgStore, turns: &[TurnRecord]) -> StoreResult<Vec<bool>> {
    // Through the turns' own connections, which commit as the store's `TurnCommit`
    // says (`PgStore::connect_with`). A turn alone without a channel link is one
    // statement, atomic by itself: it runs without BEGIN and COMMIT, two round trips
    // fewer (the commit is the statement's own). Anything more is one transaction: one
    // commit (one flush of the write-ahead log, when the commit waits for it) for every
    // turn, and from `UNNESTED_FROM` turns on two statements in all.
    if let [turn] = turns {
        if turn.channel.is_none() {
            return Ok(vec![store_turn(&store.turns, turn).await?]);
        }
    }
    // A batch begins through `super::begin`, as every transaction of this backend
    // does, so that a batch dropped part-way (a shutdown cancelling the writer) leaves
    // no connection inside a transaction.
    let tx = super::begin(&store.turns).await?;
    if turns.len() >= UNNESTED_FROM {
        batch_in_transaction(tx, turns).await
    } else {
        turns_in_transaction(tx, turns).await
    }
}
