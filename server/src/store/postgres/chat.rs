//! [`crate::store::ChatStore`] on PostgreSQL: the chat-turn writer, one statement per turn.

use super::{rows::MESSAGE_COLUMNS, PgStore};
use crate::store::chat::{
    insert_messages_sql, insert_thread_sql, message_values, turn_stored, THREAD_PARAMS,
};
use crate::ids::UserId;
use crate::store::{chat::WordsPlan, StoreResult, TurnRecord};

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

crate::store::chat::chat_store!(PgStore, sqlx::Postgres, pool, pool);

/// [`crate::store::ChatStore::record_turns`]: one statement per turn, through the turns' own
/// connections.
async fn record_turns(store: &PgStore, turns: &[TurnRecord]) -> StoreResult<Vec<bool>> {
    // Through the turns' own connections, which commit as the store's `TurnCommit`
    // says (`PgStore::connect_with`). A turn alone without a channel link is one
    // statement, atomic by itself: it runs without BEGIN and COMMIT, two round trips
    // fewer (the commit is the statement's own). Anything more is one transaction: one
    // commit (one flush of the write-ahead log, when the commit waits for it) for every
    // turn, one statement per turn.
    if let [turn] = turns {
        if turn.channel.is_none() {
            return Ok(vec![store_turn(&store.turns, turn).await?]);
        }
    }
    // A batch begins through `super::begin`, as every transaction of this backend
    // does, so that a batch dropped part-way (a shutdown cancelling the writer) leaves
    // no connection inside a transaction.
    turns_in_transaction(super::begin(&store.turns).await?, turns).await
}
