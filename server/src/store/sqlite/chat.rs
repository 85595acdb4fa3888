//! [`crate::store::ChatStore`] on SQLite: the chat-turn writer, its turns batched on the writer.

use futures::TryStreamExt;

use super::SqliteStore;
use crate::store::chat::{insert_messages_sql, insert_thread_sql, turn_stored, THREAD_PARAMS};
use crate::store::{StoreResult, TurnRecord};

crate::store::rows::turn_binders!(sqlx::Sqlite);

/// Pushes a query of the ids of threads with a message holding all `words`, each as a word
/// or a word's start, through the FTS5 index `messages_fts` (https://sqlite.org/fts5.html;
/// the words hold only letters and digits, so they need no escaping inside quotes).
fn push_words(q: &mut sqlx::QueryBuilder<'_, sqlx::Sqlite>, words: &[String]) {
    let query: Vec<String> = words.iter().map(|w| format!("\"{w}\"*")).collect();
    q.push(
        "SELECT thread_id FROM messages WHERE rowid IN \
         (SELECT rowid FROM messages_fts WHERE messages_fts MATCH ",
    )
    .push_bind(query.join(" "))
    .push(")");
}

/// The statements of one turn in one writer call, at `place` in the batch (parameters are
/// shared between them); each message goes in only when the thread is the user's.
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

/// Where a turn's call stands in its batch's transaction: the first opens it, the last commits.
#[derive(Clone, Copy)]
struct Place {
    opens: bool,
    commits: bool,
}

/// The text of [`turn_sql`].
fn build_turn_sql(new_thread: bool, messages: usize) -> String {
    match new_thread {
        true => format!(
            "{}; {}; ",
            insert_thread_sql(""),
            insert_messages_sql(THREAD_PARAMS + 1, messages, 3, "")
        ),
        false => format!("{}; ", insert_messages_sql(3, messages, 2, "")),
    }
}

/// Writes `turns` on `conn` in one transaction and answers whether each was stored. After
/// an error the transaction may be open: the connection must not go back ([`UnfinishedGuard`]).
async fn write_turns(
    conn: &mut sqlx::SqliteConnection,
    turns: &[TurnRecord],
) -> StoreResult<Vec<bool>> {
    let mut stored = Vec::with_capacity(turns.len());
    let mut committed = turns.is_empty();
    for (i, turn) in turns.iter().enumerate() {
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
        stored.push(shared::finish_turn(&mut *conn, turn, rows, turn_rows(turn)).await?);
    }
    if !committed {
        sqlx::query("COMMIT").execute(&mut *conn).await?;
    }
    Ok(stored)
}

/// The writer's connection during `record_turns`: dropped unfinished, it is closed (rolling
/// back), not returned to the pool.
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

/// Stores `turn` through `pool` in one call to the writer.
async fn store_turn(pool: &sqlx::SqlitePool, turn: &TurnRecord) -> StoreResult<bool> {
    let place = Place {
        opens: false,
        commits: false,
    };
    let sql = turn_sql(place, turn.new_thread, turn.messages.len());
    let done = turn_query(&sql, turn).execute(pool).await?;
    turn_stored(done.rows_affected(), turn_rows(turn))
}

/// The rows `turn` writes whole: its thread when new, and its messages.
fn turn_rows(turn: &TurnRecord) -> u64 {
    turn.messages.len() as u64 + u64::from(turn.new_thread)
}

crate::store::chat::chat_store!(SqliteStore, sqlx::Sqlite, writer, pool);

/// [`crate::store::ChatStore::record_turns`]: one writer call per turn.
async fn record_turns(store: &SqliteStore, turns: &[TurnRecord]) -> StoreResult<Vec<bool>> {
    // One transaction on the writer: one commit (one append to the write-ahead log) for
    // every turn. Each call to the writer is a round trip to its worker thread, so the
    // transaction's BEGIN goes with the first turn's statements and its COMMIT with the
    // last one's: a batch costs one call per turn ([`write_turns`]). A batch that fails
    // or is cancelled leaves its connection unfinished: it is closed rather than
    // returned to the pool, and closing it rolls the transaction back.
    let mut conn = UnfinishedGuard::new(store.writer.acquire().await?);
    let stored = write_turns(conn.connection(), turns).await?;
    conn.finished();
    Ok(stored)
}
