//! [`crate::store::JobQueue`] on SQLite, whose one writer runs one claim at a time.

use super::SqliteStore;
use crate::store::{jobs::JobRecord, StoreResult};

crate::store::jobs::job_store!(SqliteStore, sqlx::Sqlite, writer, pool);

/// [`crate::store::JobQueue::enqueue_job`]: read, then insert, on the one writer (the SQLite
/// schema has no partial unique index on open jobs).
async fn enqueue_job(store: &SqliteStore, j: &JobRecord) -> StoreResult<JobRecord> {
    let mut tx = store.begin_write().await?;
    if let Some(open) = shared::open_job(&mut *tx, &j.document_id).await? {
        return Ok(open);
    }
    shared::insert_job(&mut *tx, j, "").await?;
    tx.commit().await?;
    Ok(j.clone())
}
