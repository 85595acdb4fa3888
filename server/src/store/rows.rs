//! Row mappers shared by the backends: column lists and [`row_mappers!`]; times in epoch ms.

pub(crate) const USER_COLUMNS: &str =
    "id, email, name, password_hash, company, country, phone, plan, \
     email_verified_at, created_at, updated_at";
pub(crate) const SESSION_COLUMNS: &str =
    "s.id, s.user_id, s.refresh_jti, s.user_agent, s.ip, s.created_at, s.last_seen_at, s.revoked_at";
pub(crate) const KEY_COLUMNS: &str =
    "k.id, k.user_id, k.name, k.prefix, k.key_hash, k.scopes, k.agent_ids, \
     k.monthly_token_budget, k.expires_at, k.created_at, k.last_used_at, k.revoked_at";
pub(crate) const AGENT_COLUMNS: &str =
    "id, user_id, name, description, system_prompt, model, status, created_at, updated_at, \
     EXISTS (SELECT 1 FROM documents WHERE documents.agent_id = agents.id) AS has_knowledge, \
     EXISTS (SELECT 1 FROM agent_tools WHERE agent_tools.agent_id = agents.id \
     AND agent_tools.enabled) AS has_tools";
pub(crate) const THREAD_COLUMNS: &str =
    "id, agent_id, user_id, title, message_count, channel, feedback_up, feedback_down, \
     created_at, updated_at";
pub(crate) const MESSAGE_COLUMNS: &str =
    "id, thread_id, role, content, model, prompt_tokens, completion_tokens, sources, \
     latency_ms, status, error, created_at, tool_calls, api_key_id";
/// Parameters one message binds ([`MESSAGE_COLUMNS`], in order).
pub(crate) const MESSAGE_PARAMS: usize = 14;
pub(crate) const DOCUMENT_COLUMNS: &str =
    "id, agent_id, user_id, kind, name, url, format, crawl_config, \
     status, error, pages, chunks, bytes, created_at, updated_at, indexed_at, \
     refresh_hours, next_refresh_at, last_refreshed_at, refresh_counts";
pub(crate) const JOB_COLUMNS: &str = "id, kind, document_id, user_id, status, progress_done, \
     progress_total, error, attempts, created_at, started_at, finished_at";
pub(crate) const IDENTITY_COLUMNS: &str = "provider, subject, user_id, email, created_at";
pub(crate) const INTEGRATION_COLUMNS: &str =
    "id, user_id, provider_code, name, agent_id, config, credentials_sealed, \
     key_id, credential_hints, status, status_detail, public_id, inbound_secret_hash, \
     created_at, updated_at";
pub(crate) const WEBHOOK_COLUMNS: &str =
    "id, user_id, url, events, description, secret_sealed, active, disabled_reason, created_at";
pub(crate) const DELIVERY_COLUMNS: &str =
    "id, webhook_id, user_id, event, payload, status, attempts, \
     response_status, last_error, created_at, next_attempt_at, retry_from";

/// Defines the functions reading each record from a `$row`, and re-exports the column lists.
macro_rules! row_mappers {
    ($row:ty) => {
        use chrono::{DateTime, Utc};
        use sqlx::Row;

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

        pub(super) use crate::store::rows::{
            AGENT_COLUMNS, DELIVERY_COLUMNS, DOCUMENT_COLUMNS, IDENTITY_COLUMNS,
            INTEGRATION_COLUMNS, JOB_COLUMNS, KEY_COLUMNS, MESSAGE_COLUMNS, SESSION_COLUMNS,
            THREAD_COLUMNS, USER_COLUMNS, WEBHOOK_COLUMNS,
        };

        /// The stored form of `t`: epoch milliseconds.
        pub(crate) fn ms(t: DateTime<Utc>) -> i64 {
            to_millis(t)
        }

        pub(crate) fn opt_time(
            row: &$row,
            col: &str,
        ) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
            Ok(row.try_get::<Option<i64>, _>(col)?.map(from_millis))
        }

        pub(crate) fn time(row: &$row, col: &str) -> Result<DateTime<Utc>, sqlx::Error> {
            Ok(from_millis(row.try_get::<i64, _>(col)?))
        }

        pub(crate) fn plan(row: &$row, col: &str) -> StoreResult<Plan> {
            let raw: String = row.try_get(col)?;
            raw.parse()
                .map_err(|e: String| StoreError::Other(anyhow::anyhow!(e)))
        }

        pub(crate) fn user(row: &$row) -> StoreResult<UserRecord> {
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

        pub(crate) fn session(row: &$row) -> Result<SessionRecord, sqlx::Error> {
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

        pub(crate) fn api_key(row: &$row) -> Result<ApiKeyRecord, sqlx::Error> {
            let scopes: String = row.try_get("scopes")?;
            Ok(ApiKeyRecord {
                id: row.try_get("id")?,
                user_id: row.try_get("user_id")?,
                name: row.try_get("name")?,
                prefix: row.try_get("prefix")?,
                key_hash: row.try_get("key_hash")?,
                scopes: scopes.split_whitespace().map(str::to_string).collect(),
                agent_ids: row.try_get::<Option<String>, _>("agent_ids")?.map(|ids| {
                    ids.split_whitespace()
                        .map(crate::ids::AgentId::from)
                        .collect()
                }),
                monthly_token_budget: row
                    .try_get::<Option<i64>, _>("monthly_token_budget")?
                    .map(|n| n.max(0) as u64),
                expires_at: opt_time(row, "expires_at")?,
                created_at: time(row, "created_at")?,
                last_used_at: opt_time(row, "last_used_at")?,
                revoked_at: opt_time(row, "revoked_at")?,
            })
        }

        pub(crate) fn agent(row: &$row) -> Result<AgentRecord, sqlx::Error> {
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
                has_tools: row.try_get("has_tools")?,
            })
        }

        pub(crate) fn thread(row: &$row) -> Result<ThreadRecord, sqlx::Error> {
            Ok(ThreadRecord {
                id: row.try_get("id")?,
                agent_id: row.try_get("agent_id")?,
                user_id: row.try_get("user_id")?,
                title: row.try_get("title")?,
                message_count: row.try_get("message_count")?,
                channel: row.try_get("channel")?,
                feedback_up: row.try_get("feedback_up")?,
                feedback_down: row.try_get("feedback_down")?,
                created_at: time(row, "created_at")?,
                updated_at: time(row, "updated_at")?,
            })
        }

        pub(crate) fn message(row: &$row) -> Result<MessageRecord, sqlx::Error> {
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
                tool_calls: row.try_get("tool_calls")?,
                api_key_id: row.try_get("api_key_id")?,
            })
        }

        pub(crate) fn document(row: &$row) -> Result<DocumentRecord, sqlx::Error> {
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
                refresh_hours: row
                    .try_get::<Option<i64>, _>("refresh_hours")?
                    .map(|h| u32::try_from(h.max(1)).unwrap_or(u32::MAX)),
                next_refresh_at: opt_time(row, "next_refresh_at")?,
                last_refreshed_at: opt_time(row, "last_refreshed_at")?,
                // Counts that do not decode are shown as none rather than failing the read.
                refresh_counts: row
                    .try_get::<Option<String>, _>("refresh_counts")?
                    .and_then(|c| serde_json::from_str(&c).ok()),
            })
        }

        pub(crate) fn job(row: &$row) -> Result<JobRecord, sqlx::Error> {
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

        pub(crate) fn hit(r: &$row) -> Result<ChunkHit, sqlx::Error> {
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

        pub(crate) fn identity(row: &$row) -> Result<IdentityRecord, sqlx::Error> {
            Ok(IdentityRecord {
                provider: row.try_get("provider")?,
                subject: row.try_get("subject")?,
                user_id: row.try_get("user_id")?,
                email: row.try_get("email")?,
                created_at: time(row, "created_at")?,
            })
        }

        pub(crate) fn integration(row: &$row) -> Result<IntegrationRecord, sqlx::Error> {
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

        pub(crate) fn webhook(row: &$row) -> StoreResult<WebhookRecord> {
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

        pub(crate) fn delivery(row: &$row) -> Result<DeliveryRecord, sqlx::Error> {
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
    };
}
pub(crate) use row_mappers;

/// Defines `bind_message` and `turn_query`, binding a turn's values to a query on `$db`.
macro_rules! turn_binders {
    ($db:ty) => {
        /// A query on `$db`, its parameters bound so far.
        type TurnQuery<'q> = sqlx::query::Query<'q, $db, <$db as sqlx::Database>::Arguments<'q>>;

        /// Binds `m`'s [`MESSAGE_COLUMNS`] as the next parameters, with `thread_id`.
        fn bind_message<'q>(
            query: TurnQuery<'q>,
            m: &'q crate::store::MessageRecord,
            thread_id: &'q crate::ids::ThreadId,
        ) -> TurnQuery<'q> {
            use crate::store::to_millis as ms;
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
                .bind(&m.tool_calls)
                .bind(&m.api_key_id)
        }

        /// `sql`, the statement(s) of `turn`, with its thread's and messages' values bound.
        fn turn_query<'q>(sql: &'q str, turn: &'q crate::store::TurnRecord) -> TurnQuery<'q> {
            use crate::store::to_millis as ms;
            let t = &turn.thread;
            let mut query = sqlx::query(sql).bind(&t.id);
            query = if turn.new_thread {
                query
                    .bind(&t.agent_id)
                    .bind(&t.user_id)
                    .bind(&t.title)
                    .bind(t.message_count)
                    .bind(ms(t.created_at))
                    .bind(ms(t.updated_at))
                    .bind(t.channel)
            } else {
                query.bind(&t.user_id)
            };
            for m in &turn.messages {
                query = bind_message(query, m, &t.id);
            }
            query
        }
    };
}
pub(crate) use turn_binders;
