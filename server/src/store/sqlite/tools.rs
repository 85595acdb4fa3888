//! [`crate::store::ToolStore`] on SQLite: the statements shared with the other backend
//! ([`crate::store::tools::tool_store`]) and the creation, which differs.

use super::SqliteStore;
use crate::store::{
    tools::{insert_tool_query, name_conflict, ToolRecord},
    StoreResult,
};

crate::store::tools::tool_store!(SqliteStore, sqlx::Sqlite, writer, pool);

impl SqliteStore {
    /// [`crate::store::tools::ToolStore::create_tool`]: one statement on the one writer, so
    /// the count and the insert cannot interleave with another creation.
    async fn own_create_tool(&self, r: &ToolRecord, limit: u32) -> StoreResult<bool> {
        let done = insert_tool_query!(r, limit)
            .execute(&self.writer)
            .await
            .map_err(name_conflict)?;
        Ok(done.rows_affected() == 1)
    }
}
