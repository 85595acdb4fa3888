//! [`crate::store::ChatStore`] on PostgreSQL; thread counters and daily usage are kept by
//! the trigger `messages_count` in the statement that appends a message.

use super::{
    rows::{ms, MESSAGE_COLUMNS, MESSAGE_PARAMS},
    PgStore,
};
use crate::ids::ThreadId;
use crate::store::{MessageRecord, StoreError, StoreResult, ThreadRecord, TurnRecord};

crate::store::rows::turn_binders!(PgQuery);

/// The one statement that stores a turn of `messages` messages (the extended protocol takes
/// one statement per query): a new thread binds `$1`–`$7` and goes in when its user's agent
/// exists, an existing one binds `$1` id and `$2` user; both read `FOR KEY SHARE`, and each
/// message binds [`MESSAGE_PARAMS`] parameters ([`bind_message`]).
fn turn_sql(new_thread: bool, messages: usize) -> std::borrow::Cow<'static, str> {
    static TWO_MESSAGES: std::sync::OnceLock<[String; 2]> = std::sync::OnceLock::new();
    crate::store::chat::turn_statement(&TWO_MESSAGES, build_turn_sql, new_thread, messages)
}

/// The text of [`turn_sql`].
fn build_turn_sql(new_thread: bool, messages: usize) -> String {
    let mut next = if new_thread { 8 } else { 3 };
    let rows: Vec<String> = (0..messages)
        .map(|_| {
            let params: Vec<String> = (next..next + MESSAGE_PARAMS)
                .map(|n| format!("${n}"))
                .collect();
            next += MESSAGE_PARAMS;
            format!("({})", params.join(", "))
        })
        .collect();
    let values = rows.join(", ");
    if new_thread {
        format!(
            "WITH thread AS ( \
                 INSERT INTO threads (id, agent_id, user_id, title, message_count, created_at, updated_at) \
                 SELECT $1, $2, $3, $4, $5, $6, $7 \
                 WHERE EXISTS (SELECT 1 FROM agents WHERE id = $2 AND user_id = $3 FOR KEY SHARE) \
                 RETURNING id) \
             INSERT INTO messages ({MESSAGE_COLUMNS}) \
             SELECT v.* FROM thread, (VALUES {values}) AS v"
        )
    } else {
        format!(
            "INSERT INTO messages ({MESSAGE_COLUMNS}) \
             SELECT v.* FROM (VALUES {values}) AS v \
             WHERE EXISTS (SELECT 1 FROM threads WHERE id = $1 AND user_id = $2 FOR KEY SHARE)"
        )
    }
}

/// A query on the PostgreSQL store, its parameters bound so far.
type PgQuery<'q> = sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>;

/// Runs `turn`'s statement: the rows it wrote, or `None` when the agent went away between
/// check and insert (a foreign-key violation) and the turn is `alone`. In a batch that
/// error fails the transaction, and the caller stores the turns one by one.
///
/// Errors: the store's.
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

/// Whether `turn` was stored: all its rows (`true`) or none (`false`).
///
/// Errors: any other count, which the statement's shape rules out.
fn turn_stored(turn: &TurnRecord, rows: u64) -> StoreResult<bool> {
    match rows {
        0 => Ok(false),
        n if n == turn.messages.len() as u64 => Ok(true),
        n => Err(StoreError::Other(anyhow::anyhow!(
            "a chat turn wrote {n} of its {} messages",
            turn.messages.len()
        ))),
    }
}

/// Stores `turns` in `tx`: one statement per turn and its channel link, one commit.
/// Errors: the store's; the transaction is then rolled back.
async fn turns_in_transaction(
    mut tx: sqlx::Transaction<'static, sqlx::Postgres>,
    turns: &[TurnRecord],
) -> StoreResult<Vec<bool>> {
    let mut stored = Vec::with_capacity(turns.len());
    for turn in turns {
        let Some(rows) = turn_rows(&mut *tx, turn, turns.len() == 1).await? else {
            return Ok(vec![false]);
        };
        let whole = turn_stored(turn, rows)?;
        if whole {
            if let Some(link) = &turn.channel {
                link_channel(&mut tx, link, &turn.thread.id).await?;
            }
        }
        stored.push(whole);
    }
    tx.commit().await?;
    Ok(stored)
}

crate::store::chat::chat_store!(PgStore, sqlx::Postgres, pool, pool);
use shared::link_channel;

/// One statement per turn (a CTE for a new thread), through the turns' own connections.
impl PgStore {
    /// [`crate::store::ChatStore::create_thread`]: one statement (a CTE), the agent read `FOR KEY SHARE`.
    async fn own_create_thread(
        &self,
        t: &ThreadRecord,
        first: &MessageRecord,
    ) -> StoreResult<bool> {
        // One statement (PostgreSQL's extended protocol takes one statement per query):
        // the thread goes in when its user's agent exists, and the message with it. The
        // agent row is read `FOR KEY SHARE`, so an agent being deleted meanwhile is waited
        // for and then not found (no foreign-key error); the trigger `messages_count`
        // counts the message on the thread and in the usage at the end of the statement.
        let sql = format!(
            "WITH thread AS ( \
                 INSERT INTO threads (id, agent_id, user_id, title, message_count, created_at, updated_at) \
                 SELECT $1, $2, $3, $4, $5, $6, $7 \
                 WHERE EXISTS (SELECT 1 FROM agents WHERE id = $2 AND user_id = $3 FOR KEY SHARE) \
                 RETURNING id) \
             INSERT INTO messages ({MESSAGE_COLUMNS}) \
             SELECT $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20 FROM thread"
        );
        let query = sqlx::query(&sql)
            .bind(&t.id)
            .bind(&t.agent_id)
            .bind(&t.user_id)
            .bind(&t.title)
            .bind(t.message_count)
            .bind(ms(t.created_at))
            .bind(ms(t.updated_at));
        match bind_message(query, first, &t.id).execute(&self.pool).await {
            Ok(done) => Ok(done.rows_affected() == 1),
            // The user went away with the agent between the check and the insert.
            Err(sqlx::Error::Database(db)) if db.is_foreign_key_violation() => Ok(false),
            Err(err) => Err(err.into()),
        }
    }

    /// [`crate::store::ChatStore::record_turns`]: one statement per turn, through the turns' own connections.
    async fn own_record_turns(&self, turns: &[TurnRecord]) -> StoreResult<Vec<bool>> {
        // Through the turns' own connections, which commit as the store's `TurnCommit`
        // says (`PgStore::connect_with`). A turn alone without a channel link is one
        // statement, atomic by itself: it runs without BEGIN and COMMIT, two round trips
        // fewer (the commit is the statement's own). Anything more is one transaction: one
        // commit (one flush of the write-ahead log, when the commit waits for it) for every
        // turn, one statement per turn.
        if let [turn] = turns {
            if turn.channel.is_none() {
                return Ok(vec![match turn_rows(&self.turns, turn, true).await? {
                    Some(rows) => turn_stored(turn, rows)?,
                    None => false,
                }]);
            }
        }
        // A batch begins through `super::begin`, as every transaction of this backend
        // does, so that a batch dropped part-way (a shutdown cancelling the writer) leaves
        // no connection inside a transaction.
        turns_in_transaction(super::begin(&self.turns).await?, turns).await
    }
}
