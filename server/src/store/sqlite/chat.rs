//! [`crate::store::ChatStore`] on SQLite: the chat-turn writer, its turns batched on the writer.

use futures::TryStreamExt;

use super::SqliteStore;
use crate::store::chat::{insert_messages_sql, insert_thread_sql, turn_stored, THREAD_PARAMS};
use crate::ids::UserId;
use crate::store::{chat::WordsPlan, StoreResult, TurnRecord};

crate::store::rows::turn_binders!(sqlx::Sqlite);

/// Messages matching a search that make it rare: up to this many, its threads are looked up
/// by id.
const RARE_MATCHES: i64 = 2_000;

/// Messages matching a search that make it common: beyond this many, the inbox's threads are
/// walked in order ([`WordsPlan::Walk`]).
const COMMON_MATCHES: i64 = 10_000;

/// The FTS5 query of `words`: each as a word or a word's start (the words hold only letters
/// and digits, so they need no escaping inside quotes).
fn fts_query(words: &[String]) -> String {
    let query: Vec<String> = words.iter().map(|w| format!("\"{w}\"*")).collect();
    query.join(" ")
}

/// How to find the threads holding `words` (https://sqlite.org/fts5.html). SQLite keeps no
/// statistics to plan with, so the planner reads the index's own: for each word, the
/// messages of the terms it starts (`messages_fts_terms`, an `fts5vocab` table, read term
/// by term with no merge of their lists); the least common word bounds the matches:
/// - up to [`RARE_MATCHES`]: the matches' threads are read ([`WordsPlan::Threads`]);
/// - up to [`COMMON_MATCHES`]: [`WordsPlan::Gathered`] (a lookup in `messages` per match);
/// - beyond: [`WordsPlan::Walk`], which reads the page's threads' messages. Searching
///   FTS5 for a common word's start merges the lists of every term it starts (about 65 ms
///   for `the` over 260,000 messages), and FTS5 runs the whole search again for each rowid
///   it is asked about, so no plan asks it message by message.
pub(super) async fn plan_words(
    pool: &sqlx::SqlitePool,
    words: &[String],
) -> StoreResult<WordsPlan> {
    let mut least = i64::MAX;
    for word in words {
        let matches: i64 = sqlx::query_scalar(
            "SELECT coalesce(sum(doc), 0) FROM messages_fts_terms WHERE term >= $1 AND term < $2",
        )
        .bind(word)
        .bind(format!("{word}\u{10FFFF}"))
        .fetch_one(pool)
        .await?;
        least = least.min(matches);
    }
    if least > COMMON_MATCHES {
        return Ok(WordsPlan::Walk);
    }
    if least > RARE_MATCHES {
        return Ok(WordsPlan::Gathered);
    }
    let threads: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT m.thread_id FROM messages m WHERE m.rowid IN \
         (SELECT rowid FROM messages_fts WHERE messages_fts MATCH $1)",
    )
    .bind(fts_query(words))
    .fetch_all(pool)
    .await?;
    Ok(WordsPlan::Threads(threads))
}

/// Pushes "the thread is user `user_id`'s and one of its messages holds all `words`" as
/// `plan` says ([`plan_words`]). [`WordsPlan::Threads`]' user test is written `+user_id`
/// so that the user's index, which a plan would walk for the order, is not used.
pub(super) fn push_words<'a>(
    q: &mut sqlx::QueryBuilder<'a, sqlx::Sqlite>,
    user_id: &'a UserId,
    words: &[String],
    plan: WordsPlan,
) {
    let matches = "(SELECT rowid FROM messages_fts WHERE messages_fts MATCH ";
    match plan {
        WordsPlan::Threads(threads) => {
            q.push("+user_id = ").push_bind(user_id).push(" AND id IN (");
            let mut ids = q.separated(", ");
            for id in threads {
                ids.push_bind(id);
            }
            ids.push("NULL");
            q.push(")");
        }
        WordsPlan::Gathered => {
            // The matches' threads are gathered once.
            q.push("user_id = ")
                .push_bind(user_id)
                .push(" AND id IN (SELECT thread_id FROM messages WHERE rowid IN ")
                .push(matches)
                .push_bind(fts_query(words))
                .push("))");
        }
        WordsPlan::Exists | WordsPlan::Walk => {
            // The matches' rowids are gathered once (no lookup in `messages`), and each
            // thread's messages are checked against them.
            q.push("user_id = ")
                .push_bind(user_id)
                .push(
                    " AND EXISTS (SELECT 1 FROM messages m WHERE m.thread_id = threads.id \
                     AND m.rowid IN ",
                )
                .push(matches)
                .push_bind(fts_query(words))
                .push("))");
        }
    }
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
