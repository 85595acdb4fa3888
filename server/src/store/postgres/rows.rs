//! Row mappers of the PostgreSQL backend ([`crate::store::rows`] over `PgRow`).

use chrono::{DateTime, Utc};
use sqlx::{postgres::PgRow, Row};

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
    AGENT_COLUMNS, DELIVERY_COLUMNS, DOCUMENT_COLUMNS, IDENTITY_COLUMNS, INTEGRATION_COLUMNS,
    JOB_COLUMNS, KEY_COLUMNS, MESSAGE_COLUMNS, MESSAGE_PARAMS, SESSION_COLUMNS, THREAD_COLUMNS,
    USER_COLUMNS, WEBHOOK_COLUMNS,
};

crate::store::rows::row_mappers!(PgRow);
