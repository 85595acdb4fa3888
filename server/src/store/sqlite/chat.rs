//! [`crate::store::ChatStore`] on SQLite (`migrations/sqlite/0002_agents_chat.sql`; the thread counters
//! and daily usage are kept by the triggers of `0010_message_triggers.sql`).

use futures::TryStreamExt;

use super::{
    rows::{ms, MESSAGE_COLUMNS, MESSAGE_PARAMS},
    SqliteStore,
};
use crate::ids::ThreadId;
use crate::store::{MessageRecord, StoreError, StoreResult, ThreadRecord, TurnRecord};

crate::store::rows::turn_binders!(SqliteQuery);

/// The statements that store one turn of `messages` messages in one writer call, at
/// `place` in the batch's transaction (`?NNN` parameters are shared between them): a new
/// thread binds `?1`–`?7`, an existing one `?1` id and `?2` user; each message binds
/// [`MESSAGE_PARAMS`] and goes in only when the thread is the user's, so the turn is whole
/// or nothing.
fn turn_sql(place: Place, new_thread: bool, messages: usize) -> std::borrow::Cow<'static, str> {
    static TWO_MESSAGES: [std::sync::OnceLock<[String; 2]>; 4] =
        [const { std::sync::OnceLock::new() }; 4];
    let build: fn(bool, usize) -> String = match (place.opens, place.commits) {
        (false, false) => build_turn_sql,
        (true, false) => |new_thread, messages| {
            format!("BEGIN IMMEDIATE; {}", build_turn_sql(new_thread, messages))
        },
        (false, true) => {
            |new_thread, messages| format!("{}COMMIT;", build_turn_sql(new_thread, messages))
        }
        (true, true) => |new_thread, messages| {
            format!(
                "BEGIN IMMEDIATE; {}COMMIT;",
                build_turn_sql(new_thread, messages)
            )
        },
    };
    let shapes = &TWO_MESSAGES[usize::from(place.opens) | usize::from(place.commits) << 1];
    crate::store::chat::turn_statement(shapes, build, new_thread, messages)
}

/// Where a turn's call stands in its batch's transaction: the first opens it (`BEGIN
/// IMMEDIATE`), the last commits it, so a batch costs one writer call per turn.
#[derive(Clone, Copy)]
struct Place {
    opens: bool,
    commits: bool,
}

/// The text of [`turn_sql`].
fn build_turn_sql(new_thread: bool, messages: usize) -> String {
    let (mut next, user) = if new_thread { (8, 3) } else { (3, 2) };
    let mut sql = String::with_capacity(256 * (messages + 1));
    if new_thread {
        sql.push_str(
            "INSERT INTO threads (id, agent_id, user_id, title, message_count, created_at, updated_at) \
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 \
             WHERE EXISTS (SELECT 1 FROM agents WHERE id = ?2 AND user_id = ?3); ",
        );
    }
    for _ in 0..messages {
        let params: Vec<String> = (next..next + MESSAGE_PARAMS)
            .map(|n| format!("?{n}"))
            .collect();
        next += MESSAGE_PARAMS;
        sql.push_str(&format!(
            "INSERT INTO messages ({MESSAGE_COLUMNS}) SELECT {} \
             WHERE EXISTS (SELECT 1 FROM threads WHERE id = ?1 AND user_id = ?{user}); ",
            params.join(", ")
        ));
    }
    sql
}

/// Writes `turns` on `conn` in one transaction ([`Place`]) and answers whether each was
/// stored; a channel link, and a final COMMIT after one, take a call of their own.
///
/// Errors: the store's, and a turn that wrote only some of its rows. After an error the
/// transaction may still be open and the connection must not go back ([`UnfinishedGuard`]).
async fn write_turns(
    conn: &mut sqlx::SqliteConnection,
    turns: &[TurnRecord],
) -> StoreResult<Vec<bool>> {
    let mut stored = Vec::with_capacity(turns.len());
    let mut committed = turns.is_empty();
    for (i, turn) in turns.iter().enumerate() {
        let t = &turn.thread;
        let place = Place {
            opens: i == 0,
            commits: i + 1 == turns.len() && turn.channel.is_none(),
        };
        let sql = turn_sql(place, turn.new_thread, turn.messages.len());
        let query = turn_query(&sql, turn);
        // The rows each statement wrote. SQLite answers a BEGIN and a COMMIT with the count
        // of the connection's last write, whatever it was (`sqlite3_changes`), so theirs
        // are left out.
        let written: Vec<u64> = sqlx::Executor::fetch_many(&mut *conn, query)
            .try_filter_map(|step| async move { Ok(step.left().map(|done| done.rows_affected())) })
            .try_collect()
            .await?;
        let own =
            usize::from(place.opens)..written.len().saturating_sub(usize::from(place.commits));
        let rows: u64 = written.get(own).map_or(0, |own| own.iter().sum());
        committed = place.commits;
        let whole = turn.messages.len() as u64 + u64::from(turn.new_thread);
        match rows {
            0 => stored.push(false),
            n if n == whole => {
                if let Some(link) = &turn.channel {
                    link_channel(&mut *conn, link, &t.id).await?;
                }
                stored.push(true)
            }
            n => {
                return Err(StoreError::Other(anyhow::anyhow!(
                    "a chat turn wrote {n} of its {whole} rows"
                )))
            }
        }
    }
    if !committed {
        sqlx::query("COMMIT").execute(&mut *conn).await?;
    }
    Ok(stored)
}

/// The writer's connection while `record_turns` runs its own transaction on it. Dropped
/// before [`UnfinishedGuard::finished`] (a failure or a cancellation), it closes the
/// connection, which rolls the transaction back, instead of returning it to the pool.
struct UnfinishedGuard {
    conn: sqlx::pool::PoolConnection<sqlx::Sqlite>,
    finished: bool,
}

impl UnfinishedGuard {
    fn new(conn: sqlx::pool::PoolConnection<sqlx::Sqlite>) -> Self {
        Self {
            conn,
            finished: false,
        }
    }

    fn connection(&mut self) -> &mut sqlx::SqliteConnection {
        &mut self.conn
    }

    /// No transaction is open: the connection goes back to the pool when dropped.
    fn finished(&mut self) {
        self.finished = true;
    }
}

impl Drop for UnfinishedGuard {
    fn drop(&mut self) {
        if !self.finished {
            self.conn.close_on_drop();
        }
    }
}

/// A query on the SQLite store, its parameters bound so far.
type SqliteQuery<'q> = sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments<'q>>;

crate::store::chat::chat_store!(SqliteStore, sqlx::Sqlite, writer, pool);
use shared::link_channel;

/// Two statements in one call to the one writer, and the chat-turn writer's batches of
/// calls.
impl SqliteStore {
    /// [`crate::store::ChatStore::create_thread`]: two statements in one call to the writer.
    async fn own_create_thread(
        &self,
        t: &ThreadRecord,
        first: &MessageRecord,
    ) -> StoreResult<bool> {
        // Two statements in one call to the writer (sqlx runs them in order, and `?NNN`
        // parameters are shared between them): the message goes in only when the thread
        // did. The triggers of migration 0010 count it on the thread and in the usage.
        let sql = format!(
            "INSERT INTO threads (id, agent_id, user_id, title, message_count, created_at, updated_at) \
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 \
             WHERE EXISTS (SELECT 1 FROM agents WHERE id = ?2 AND user_id = ?3); \
             INSERT INTO messages ({MESSAGE_COLUMNS}) \
             SELECT ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20 \
             WHERE EXISTS (SELECT 1 FROM threads WHERE id = ?1 AND user_id = ?3)"
        );
        let query = sqlx::query(&sql)
            .bind(&t.id)
            .bind(&t.agent_id)
            .bind(&t.user_id)
            .bind(&t.title)
            .bind(t.message_count)
            .bind(ms(t.created_at))
            .bind(ms(t.updated_at));
        let done = bind_message(query, first, &t.id)
            .execute(&self.writer)
            .await?;
        Ok(done.rows_affected() == 2)
    }

    /// [`crate::store::ChatStore::record_turns`]: the chat-turn writer's batches, one call to the writer per
    /// turn.
    async fn own_record_turns(&self, turns: &[TurnRecord]) -> StoreResult<Vec<bool>> {
        // One transaction on the writer: one commit (one append to the write-ahead log) for
        // every turn. Each call to the writer is a round trip to its worker thread, so the
        // transaction's BEGIN goes with the first turn's statements and its COMMIT with the
        // last one's: a batch costs one call per turn ([`write_turns`]). A batch that fails
        // or is cancelled leaves its connection unfinished: it is closed rather than
        // returned to the pool, and closing it rolls the transaction back.
        let mut conn = UnfinishedGuard::new(self.writer.acquire().await?);
        let stored = write_turns(conn.connection(), turns).await?;
        conn.finished();
        Ok(stored)
    }
}
