//! Row mappers of the SQLite backend ([`crate::store::rows`] over `SqliteRow`).

crate::store::rows::row_mappers!(sqlx::sqlite::SqliteRow);

#[cfg(test)]
mod tests {
    use std::fmt::Debug;

    use sqlx::{Decode, Encode, Sqlite, SqlitePool, Type};

    use super::super::tests::store;
    use crate::{
        domain::{EventType, OAuthProvider, ProviderCode, Role},
        store::{
            agents::AgentStatus,
            chat::ReplyStatus,
            documents::{DocumentSource, DocumentStatus},
            integrations::IntegrationStatus,
            jobs::{JobKind, JobStatus},
            webhooks::DeliveryStatus,
            TokenPurpose,
        },
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
        round_trip(pool, OAuthProvider::ALL.map(|v| (v, v.code()))).await;
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
                sorted(OAuthProvider::ALL.map(|v| v.code())),
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
