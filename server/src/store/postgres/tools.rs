//! [`crate::store::ToolStore`] on PostgreSQL: the statements shared with the other backend
//! ([`crate::store::tools::tool_store`]) and the creation, which differs.

use super::PgStore;
use crate::store::{
    tools::{insert_tool_query, name_conflict, ToolRecord},
    StoreResult,
};

crate::store::tools::tool_store!(PgStore, sqlx::Postgres, pool, pool);

impl PgStore {
    /// Locks the agent's row first (`FOR UPDATE`) so parallel creations count each other's
    /// tools, as [`super::lock_account`] does for an account.
    async fn own_create_tool(&self, r: &ToolRecord, limit: u32) -> StoreResult<bool> {
        let mut tx = self.begin_write().await?;
        sqlx::query("SELECT 1 FROM agents WHERE id = $1 FOR UPDATE")
            .bind(&r.agent_id)
            .execute(&mut *tx)
            .await?;
        let done = insert_tool_query!(r, limit)
            .execute(&mut *tx)
            .await
            .map_err(name_conflict)?;
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }
}
