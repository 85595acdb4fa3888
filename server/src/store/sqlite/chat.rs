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

/// The statements that store one turn ([`crate::store::ChatStore::record_turns`]) of `messages` messages,
/// for one call to the writer (sqlx runs them in order, and `?NNN` parameters are shared
/// between them), at `place` in the batch's transaction. A new thread binds `?1`–`?7` to
/// the thread's columns and goes in when its user's agent exists; an existing one binds
/// `?1` to its id and `?2` to its user. Each message ([`MESSAGE_PARAMS`] parameters, [`bind_message`])
/// goes in when the thread exists and is the user's, so the turn is written whole or not at
/// all; the triggers of migration 0010 count every message.
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

/// Where a turn's call stands in its batch's transaction ([`write_turns`]): the first turn's
/// call opens it (`BEGIN IMMEDIATE` before the turn's statements) and the last one's
/// commits it (`COMMIT` after them), so that a batch costs one call to the writer per turn,
/// and a turn alone one call in all.
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

/// Writes `turns` on `conn` in one transaction that the first turn's call opens and the
/// last one's commits ([`Place`]); answers whether each turn was stored
/// ([`crate::store::ChatStore::record_turns`]). A turn with a channel link ([`TurnRecord::channel`]) is
/// linked after its statements, in a call of its own; when it is the last, the COMMIT is a
/// call of its own too.
///
/// Errors: the store's, and a turn that wrote only some of its rows (which the statements'
/// shape rules out, [`turn_sql`]). After an error the transaction may still be open, and
/// the connection must not go back to the pool ([`UnfinishedGuard`]).
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

/// The writer's connection while [`crate::store::ChatStore::record_turns`] runs its own transaction on
/// it (sqlx's `Transaction` would cost one more round trip for its BEGIN). Dropped before
/// [`UnfinishedGuard::finished`] — the write failed, or the future was cancelled between
/// two calls — the connection is closed instead of returned to the pool, which rolls back
/// the open transaction; the pool opens a new writer. Failures are rare (a broken disk, a
/// clashing id): reopening the writer then is simpler than a ROLLBACK that may itself fail.
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
