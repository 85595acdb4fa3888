//! Row mappers of the PostgreSQL backend ([`crate::store::rows`] over `PgRow`).

crate::store::rows::row_mappers!(sqlx::postgres::PgRow);
