//! Row mappers of the SQLite backend: each record's column list, in the order its mapper
//! and its INSERTs use, and the function that reads it from a row. Times are stored as
//! epoch milliseconds ([`crate::store::to_millis`]).

use chrono::{DateTime, Utc};
use sqlx::{sqlite::SqliteRow, Row};

use crate::{
    domain::Plan,
    store::{
        documents::{ChunkHit, DocumentRecord},
        from_millis,
        identity::IdentityRecord,
        integrations::IntegrationRecord,
        jobs::JobRecord,
        to_millis,
        webhooks::{DeliveryRecord, WebhookRecord},
        AgentRecord, ApiKeyRecord, MessageRecord, SessionRecord, StoreError, StoreResult,
        ThreadRecord, UserRecord,
    },
};

/// The stored form of `t`: epoch milliseconds.
pub(super) fn ms(t: DateTime<Utc>) -> i64 {
    to_millis(t)
}

pub(super) fn opt_time(row: &SqliteRow, col: &str) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    Ok(row.try_get::<Option<i64>, _>(col)?.map(from_millis))
}

pub(super) fn time(row: &SqliteRow, col: &str) -> Result<DateTime<Utc>, sqlx::Error> {
    Ok(from_millis(row.try_get::<i64, _>(col)?))
}

pub(super) fn plan(row: &SqliteRow, col: &str) -> StoreResult<Plan> {
    let raw: String = row.try_get(col)?;
    raw.parse()
        .map_err(|e: String| StoreError::Other(anyhow::anyhow!(e)))
}

pub(super) fn user(row: &SqliteRow) -> StoreResult<UserRecord> {
    Ok(UserRecord {
        id: row.try_get("id")?,
        email: row.try_get("email")?,
        name: row.try_get("name")?,
        password_hash: row.try_get("password_hash")?,
        company: row.try_get("company")?,
        country: row.try_get("country")?,
        phone: row.try_get("phone")?,
        plan: plan(row, "plan")?,
        email_verified_at: opt_time(row, "email_verified_at")?,
        created_at: time(row, "created_at")?,
        updated_at: time(row, "updated_at")?,
    })
}

pub(super) fn session(row: &SqliteRow) -> Result<SessionRecord, sqlx::Error> {
    Ok(SessionRecord {
        id: row.try_get("id")?,
        user_id: row.try_get("user_id")?,
        refresh_jti: row.try_get("refresh_jti")?,
        user_agent: row.try_get("user_agent")?,
        ip: row.try_get("ip")?,
        created_at: time(row, "created_at")?,
        last_seen_at: time(row, "last_seen_at")?,
        revoked_at: opt_time(row, "revoked_at")?,
    })
}

pub(super) fn api_key(row: &SqliteRow) -> Result<ApiKeyRecord, sqlx::Error> {
    let scopes: String = row.try_get("scopes")?;
    Ok(ApiKeyRecord {
        id: row.try_get("id")?,
        user_id: row.try_get("user_id")?,
        name: row.try_get("name")?,
        prefix: row.try_get("prefix")?,
        key_hash: row.try_get("key_hash")?,
        scopes: scopes.split_whitespace().map(str::to_string).collect(),
        expires_at: opt_time(row, "expires_at")?,
        created_at: time(row, "created_at")?,
        last_used_at: opt_time(row, "last_used_at")?,
        revoked_at: opt_time(row, "revoked_at")?,
    })
}

pub(super) const USER_COLUMNS: &str =
    "id, email, name, password_hash, company, country, phone, plan, \
     email_verified_at, created_at, updated_at";
pub(super) const SESSION_COLUMNS: &str =
    "s.id, s.user_id, s.refresh_jti, s.user_agent, s.ip, s.created_at, s.last_seen_at, s.revoked_at";
pub(super) const KEY_COLUMNS: &str =
    "k.id, k.user_id, k.name, k.prefix, k.key_hash, k.scopes, k.expires_at, \
     k.created_at, k.last_used_at, k.revoked_at";

pub(super) fn agent(row: &SqliteRow) -> Result<AgentRecord, sqlx::Error> {
    Ok(AgentRecord {
        id: row.try_get("id")?,
        user_id: row.try_get("user_id")?,
        name: row.try_get("name")?,
        description: row.try_get("description")?,
        system_prompt: row.try_get("system_prompt")?,
        model: row.try_get("model")?,
        status: row.try_get("status")?,
        created_at: time(row, "created_at")?,
        updated_at: time(row, "updated_at")?,
        has_knowledge: row.try_get("has_knowledge")?,
    })
}

pub(super) fn thread(row: &SqliteRow) -> Result<ThreadRecord, sqlx::Error> {
    Ok(ThreadRecord {
        id: row.try_get("id")?,
        agent_id: row.try_get("agent_id")?,
        user_id: row.try_get("user_id")?,
        title: row.try_get("title")?,
        message_count: row.try_get("message_count")?,
        created_at: time(row, "created_at")?,
        updated_at: time(row, "updated_at")?,
    })
}

pub(super) fn message(row: &SqliteRow) -> Result<MessageRecord, sqlx::Error> {
    Ok(MessageRecord {
        id: row.try_get("id")?,
        thread_id: row.try_get("thread_id")?,
        role: row.try_get("role")?,
        content: row.try_get("content")?,
        model: row.try_get("model")?,
        prompt_tokens: row.try_get("prompt_tokens")?,
        completion_tokens: row.try_get("completion_tokens")?,
        sources: row.try_get("sources")?,
        latency_ms: row.try_get("latency_ms")?,
        status: row.try_get("status")?,
        error: row.try_get("error")?,
        created_at: time(row, "created_at")?,
    })
}

pub(super) const AGENT_COLUMNS: &str =
    "id, user_id, name, description, system_prompt, model, status, created_at, updated_at, \
     EXISTS (SELECT 1 FROM documents WHERE documents.agent_id = agents.id) AS has_knowledge";
pub(super) const THREAD_COLUMNS: &str =
    "id, agent_id, user_id, title, message_count, created_at, updated_at";
pub(super) const MESSAGE_COLUMNS: &str =
    "id, thread_id, role, content, model, prompt_tokens, completion_tokens, sources, \
     latency_ms, status, error, created_at";

pub(super) const DOCUMENT_COLUMNS: &str =
    "id, agent_id, user_id, kind, name, url, format, crawl_config, \
     status, error, pages, chunks, bytes, created_at, updated_at, indexed_at";

pub(super) const JOB_COLUMNS: &str = "id, kind, document_id, user_id, status, progress_done, \
     progress_total, error, attempts, created_at, started_at, finished_at";

pub(super) fn document(row: &SqliteRow) -> Result<DocumentRecord, sqlx::Error> {
    Ok(DocumentRecord {
        id: row.try_get("id")?,
        agent_id: row.try_get("agent_id")?,
        user_id: row.try_get("user_id")?,
        kind: row.try_get("kind")?,
        name: row.try_get("name")?,
        url: row.try_get("url")?,
        format: row.try_get("format")?,
        crawl_config: row.try_get("crawl_config")?,
        status: row.try_get("status")?,
        error: row.try_get("error")?,
        pages: row
            .try_get::<Option<i64>, _>("pages")?
            .map(|p| p.max(0) as u32),
        chunks: row.try_get::<i64, _>("chunks")?.max(0) as u32,
        bytes: row.try_get::<i64, _>("bytes")?.max(0) as u64,
        created_at: time(row, "created_at")?,
        updated_at: time(row, "updated_at")?,
        indexed_at: opt_time(row, "indexed_at")?,
    })
}

pub(super) fn job(row: &SqliteRow) -> Result<JobRecord, sqlx::Error> {
    Ok(JobRecord {
        id: row.try_get("id")?,
        kind: row.try_get("kind")?,
        document_id: row.try_get("document_id")?,
        user_id: row.try_get("user_id")?,
        status: row.try_get("status")?,
        progress_done: row.try_get::<i64, _>("progress_done")?.max(0) as u32,
        progress_total: row.try_get::<i64, _>("progress_total")?.max(0) as u32,
        error: row.try_get("error")?,
        attempts: row.try_get::<i64, _>("attempts")?.max(0) as u32,
        created_at: time(row, "created_at")?,
        started_at: opt_time(row, "started_at")?,
        finished_at: opt_time(row, "finished_at")?,
    })
}

pub(super) fn hit(r: &SqliteRow) -> Result<ChunkHit, sqlx::Error> {
    Ok(ChunkHit {
        chunk_id: r.try_get("id")?,
        document_id: r.try_get("document_id")?,
        title: r.try_get("title")?,
        url: r.try_get("page_url")?,
        document_name: r.try_get("document_name")?,
        heading_path: r.try_get("heading_path")?,
        text: r.try_get("text")?,
        score: r.try_get("score")?,
    })
}

pub(super) const IDENTITY_COLUMNS: &str = "provider, subject, user_id, email, created_at";

pub(super) fn identity(row: &SqliteRow) -> Result<IdentityRecord, sqlx::Error> {
    Ok(IdentityRecord {
        provider: row.try_get("provider")?,
        subject: row.try_get("subject")?,
        user_id: row.try_get("user_id")?,
        email: row.try_get("email")?,
        created_at: time(row, "created_at")?,
    })
}

pub(super) const INTEGRATION_COLUMNS: &str =
    "id, user_id, provider_code, name, agent_id, config, credentials_sealed, \
     key_id, credential_hints, status, status_detail, public_id, inbound_secret_hash, \
     created_at, updated_at";

pub(super) fn integration(row: &SqliteRow) -> Result<IntegrationRecord, sqlx::Error> {
    Ok(IntegrationRecord {
        id: row.try_get("id")?,
        user_id: row.try_get("user_id")?,
        provider_code: row.try_get("provider_code")?,
        name: row.try_get("name")?,
        agent_id: row.try_get("agent_id")?,
        config: row.try_get("config")?,
        credentials_sealed: row.try_get("credentials_sealed")?,
        key_id: row.try_get("key_id")?,
        credential_hints: row.try_get("credential_hints")?,
        status: row.try_get("status")?,
        status_detail: row.try_get("status_detail")?,
        public_id: row.try_get("public_id")?,
        inbound_secret_hash: row.try_get("inbound_secret_hash")?,
        created_at: time(row, "created_at")?,
        updated_at: time(row, "updated_at")?,
    })
}

pub(super) const WEBHOOK_COLUMNS: &str =
    "id, user_id, url, events, description, secret_sealed, active, disabled_reason, created_at";
pub(super) const DELIVERY_COLUMNS: &str =
    "id, webhook_id, user_id, event, payload, status, attempts, \
     response_status, last_error, created_at, next_attempt_at, retry_from";

pub(super) fn webhook(row: &SqliteRow) -> StoreResult<WebhookRecord> {
    let events: String = row.try_get("events")?;
    Ok(WebhookRecord {
        id: row.try_get("id")?,
        user_id: row.try_get("user_id")?,
        url: row.try_get("url")?,
        events: serde_json::from_str(&events)
            .map_err(|e| StoreError::Other(anyhow::anyhow!("webhook events: {e}")))?,
        description: row.try_get("description")?,
        secret_sealed: row.try_get("secret_sealed")?,
        active: row.try_get("active")?,
        disabled_reason: row.try_get("disabled_reason")?,
        created_at: time(row, "created_at")?,
    })
}

pub(super) fn delivery(row: &SqliteRow) -> Result<DeliveryRecord, sqlx::Error> {
    Ok(DeliveryRecord {
        id: row.try_get("id")?,
        webhook_id: row.try_get("webhook_id")?,
        user_id: row.try_get("user_id")?,
        event: row.try_get("event")?,
        payload: row.try_get("payload")?,
        status: row.try_get("status")?,
        attempts: row.try_get::<i64, _>("attempts")?.try_into().unwrap_or(0),
        response_status: row
            .try_get::<Option<i64>, _>("response_status")?
            .and_then(|s| u16::try_from(s).ok()),
        last_error: row.try_get("last_error")?,
        created_at: time(row, "created_at")?,
        next_attempt_at: opt_time(row, "next_attempt_at")?,
        retry_from: time(row, "retry_from")?,
    })
}

#[cfg(test)]
mod tests {
    use std::fmt::Debug;

    use sqlx::{Decode, Encode, Sqlite, SqlitePool, Type};

    use super::super::tests::store;
    use crate::{
        auth::oauth::Provider,
        domain::Role,
        integrations::catalog::ProviderCode,
        store::{
            agents::AgentStatus,
            chat::ReplyStatus,
            documents::{DocumentSource, DocumentStatus},
            integrations::IntegrationStatus,
            jobs::{JobKind, JobStatus},
            webhooks::DeliveryStatus,
            TokenPurpose,
        },
        webhooks::EventType,
    };

    /// Binds every value with its text, checks that SQLite receives exactly that text and
    /// that the text decodes back to the value.
    async fn round_trip<T>(pool: &SqlitePool, values: impl IntoIterator<Item = (T, &str)>)
    where
        T: for<'q> Encode<'q, Sqlite>
            + for<'r> Decode<'r, Sqlite>
            + Type<Sqlite>
            + Copy
            + Debug
            + PartialEq
            + Send
            + Unpin
            + 'static,
    {
        for (value, text) in values {
            let stored: String = sqlx::query_scalar("SELECT ?")
                .bind(value)
                .fetch_one(pool)
                .await
                .unwrap();
            assert_eq!(stored, text, "{value:?} is stored as its text");
            let read: T = sqlx::query_scalar("SELECT ?")
                .bind(text)
                .fetch_one(pool)
                .await
                .unwrap();
            assert_eq!(read, value, "{text} is read back");
        }
    }

    /// The quoted values of `CHECK (column IN ('a', 'b'))` in the `CREATE TABLE` of
    /// `table`, as the migrations wrote them, sorted.
    async fn check_list(pool: &SqlitePool, table: &str, column: &str) -> Vec<String> {
        let sql: String =
            sqlx::query_scalar("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?")
                .bind(table)
                .fetch_one(pool)
                .await
                .unwrap();
        let start = format!("CHECK ({column} IN (");
        let list = sql
            .split_once(start.as_str())
            .and_then(|(_, rest)| rest.split_once("))"))
            .map(|(list, _)| list)
            .unwrap_or_else(|| panic!("{table}.{column} has no CHECK list: {sql}"));
        let mut values: Vec<String> = list
            .split(',')
            .map(|v| v.trim().trim_matches('\'').to_string())
            .collect();
        values.sort_unstable();
        values
    }

    fn sorted(texts: impl IntoIterator<Item = &'static str>) -> Vec<String> {
        let mut texts: Vec<String> = texts.into_iter().map(str::to_string).collect();
        texts.sort_unstable();
        texts
    }

    /// Every enum of the store boundary binds as its `as_str` text and decodes from it,
    /// and its texts are exactly those the migrations' CHECK constraints allow (the columns
    /// without one hold the default the migrations give them).
    #[tokio::test]
    async fn enums_are_stored_as_the_text_the_migrations_use() {
        let (_dir, store) = store().await;
        let pool = store.pool();
        round_trip(pool, DocumentStatus::ALL.map(|v| (v, v.as_str()))).await;
        round_trip(pool, DocumentSource::ALL.map(|v| (v, v.as_str()))).await;
        round_trip(pool, JobStatus::ALL.map(|v| (v, v.as_str()))).await;
        round_trip(pool, JobKind::ALL.map(|v| (v, v.as_str()))).await;
        round_trip(pool, DeliveryStatus::ALL.map(|v| (v, v.as_str()))).await;
        round_trip(pool, EventType::ALL.map(|v| (v, v.as_str()))).await;
        round_trip(pool, Role::ALL.map(|v| (v, v.as_str()))).await;
        round_trip(pool, ReplyStatus::ALL.map(|v| (v, v.as_str()))).await;
        round_trip(pool, IntegrationStatus::ALL.map(|v| (v, v.as_str()))).await;
        round_trip(pool, ProviderCode::ALL.map(|v| (v, v.as_str()))).await;
        round_trip(pool, AgentStatus::ALL.map(|v| (v, v.as_str()))).await;
        round_trip(pool, Provider::ALL.map(|v| (v, v.code()))).await;
        round_trip(pool, TokenPurpose::ALL.map(|v| (v, v.as_str()))).await;

        let checks = [
            (
                "documents",
                "status",
                sorted(DocumentStatus::ALL.map(|v| v.as_str())),
            ),
            (
                "documents",
                "kind",
                sorted(DocumentSource::ALL.map(|v| v.as_str())),
            ),
            ("jobs", "status", sorted(JobStatus::ALL.map(|v| v.as_str()))),
            ("jobs", "kind", sorted(JobKind::ALL.map(|v| v.as_str()))),
            (
                "webhook_deliveries",
                "status",
                sorted(DeliveryStatus::ALL.map(|v| v.as_str())),
            ),
            ("messages", "role", sorted(Role::ALL.map(|v| v.as_str()))),
            (
                "messages",
                "status",
                sorted(ReplyStatus::ALL.map(|v| v.as_str())),
            ),
            (
                "user_identities",
                "provider",
                sorted(Provider::ALL.map(|v| v.code())),
            ),
            (
                "email_tokens",
                "purpose",
                sorted(TokenPurpose::ALL.map(|v| v.as_str())),
            ),
        ];
        for (table, column, texts) in checks {
            assert_eq!(
                check_list(pool, table, column).await,
                texts,
                "{table}.{column}"
            );
        }
        for (table, default) in [
            ("agents", AgentStatus::Active.as_str()),
            ("integrations", IntegrationStatus::Active.as_str()),
        ] {
            let declared: Option<String> = sqlx::query_scalar(
                "SELECT dflt_value FROM pragma_table_info(?) WHERE name = 'status'",
            )
            .bind(table)
            .fetch_one(pool)
            .await
            .unwrap();
            assert_eq!(declared, Some(format!("'{default}'")), "{table}.status");
        }
    }
}
