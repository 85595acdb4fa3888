//! [`ChatStore`] on PostgreSQL (`migrations/postgres/0001_baseline.sql`; the thread
//! counters and daily usage are kept by its trigger `messages_count`, in the statement that
//! appends the message).

use async_trait::async_trait;
use chrono::NaiveDate;
use sqlx::Row;

use super::{
    rows::{message, ms, thread, MESSAGE_COLUMNS, THREAD_COLUMNS},
    PgStore,
};
use crate::ids::{AgentId, ThreadId, UserId};
use crate::store::{
    ChatStore, Cursor, MessageRecord, StoreError, StoreResult, ThreadRecord, UsageDay,
};

/// Binds the next twelve parameters of `query` to `m`'s [`MESSAGE_COLUMNS`], in their
/// order, with `thread_id` for its thread.
fn bind_message<'q>(
    query: PgQuery<'q>,
    m: &'q MessageRecord,
    thread_id: &'q ThreadId,
) -> PgQuery<'q> {
    query
        .bind(&m.id)
        .bind(thread_id)
        .bind(m.role)
        .bind(&m.content)
        .bind(&m.model)
        .bind(m.prompt_tokens)
        .bind(m.completion_tokens)
        .bind(&m.sources)
        .bind(m.latency_ms)
        .bind(m.status)
        .bind(&m.error)
        .bind(ms(m.created_at))
}

/// A query on the PostgreSQL store, its parameters bound so far.
type PgQuery<'q> = sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>;

#[async_trait]
impl ChatStore for PgStore {
    async fn create_thread(&self, t: &ThreadRecord, first: &MessageRecord) -> StoreResult<bool> {
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
             SELECT $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19 FROM thread"
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
        .fetch_optional(&self.pool)
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
        let (at, id) = cursor.map_or((i64::MAX, String::new()), |c| (c.at, c.id.clone()));
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
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(thread).collect::<Result<_, _>>()?)
    }

    async fn delete_thread(
        &self,
        user_id: &UserId,
        agent_id: &AgentId,
        thread_id: &ThreadId,
    ) -> StoreResult<bool> {
        let done =
            sqlx::query("DELETE FROM threads WHERE user_id = $1 AND agent_id = $2 AND id = $3")
                .bind(user_id)
                .bind(agent_id)
                .bind(thread_id)
                .execute(&self.pool)
                .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn append_message(&self, m: &MessageRecord) -> StoreResult<()> {
        // The thread's count and activity time and the owner's usage are kept by the
        // trigger `messages_count`, inside this statement.
        let sql = format!(
            "INSERT INTO messages ({MESSAGE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
        );
        bind_message(sqlx::query(&sql), m, &m.thread_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn usage(&self, user_id: &UserId, from: NaiveDate) -> StoreResult<Vec<UsageDay>> {
        let rows = sqlx::query(
            "SELECT day, chats, prompt_tokens, completion_tokens FROM usage_daily \
             WHERE user_id = $1 AND day >= $2 ORDER BY day",
        )
        .bind(user_id)
        .bind(from.format("%Y-%m-%d").to_string())
        .fetch_all(&self.pool)
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
        let (at, id) = cursor.map_or((i64::MIN, String::new()), |c| (c.at, c.id.clone()));
        let rows = sqlx::query(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages WHERE thread_id = $1 \
             AND (created_at > $2 OR (created_at = $3 AND id > $4)) ORDER BY created_at, id LIMIT $5"
        ))
        .bind(thread_id)
        .bind(at)
        .bind(at)
        .bind(&id)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
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
        .fetch_all(&self.pool)
        .await?;
        let mut messages: Vec<MessageRecord> =
            rows.iter().map(message).collect::<Result<_, _>>()?;
        messages.reverse();
        Ok(messages)
    }
}
