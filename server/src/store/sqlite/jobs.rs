//! [`crate::store::JobQueue`] on SQLite; write transactions start with `BEGIN IMMEDIATE`.

use super::{
    rows::{job, JOB_COLUMNS},
    SqliteStore,
};
use crate::ids::DocumentId;
use crate::store::{
    jobs::{JobRecord, JobStatus},
    StoreResult,
};

/// Nothing to lock: the one writer runs no delete of the document meanwhile, and the job
/// of a deleted document is gone with it.
async fn lock_document(
    _tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    _document_id: &DocumentId,
) -> Result<bool, sqlx::Error> {
    Ok(true)
}

/// One statement on the one writer, which runs one claim at a time.
const CLAIM_JOB: &str = "UPDATE jobs SET status = $1, lease_until = $2, attempts = attempts + 1, \
     started_at = COALESCE(started_at, $3) \
     WHERE id = (SELECT id FROM jobs WHERE status = $4 \
                 OR (status = $1 AND lease_until < $3) ORDER BY created_at, id LIMIT 1)";

crate::store::jobs::job_store!(SqliteStore, sqlx::Sqlite, writer, pool);
pub(super) use shared::insert_job;

/// The one writer runs one claim at a time.
impl SqliteStore {
    /// [`crate::store::JobQueue::enqueue_job`]: read, then insert, on the one writer.
    async fn own_enqueue_job(&self, j: &JobRecord) -> StoreResult<JobRecord> {
        let mut tx = self.begin_write().await?;
        let existing = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE document_id = ? AND status IN (?, ?) \
             ORDER BY created_at LIMIT 1"
        ))
        .bind(&j.document_id)
        .bind(JobStatus::Queued)
        .bind(JobStatus::Running)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(row) = existing {
            return Ok(job(&row)?);
        }
        insert_job(&mut *tx, j, "").await?;
        tx.commit().await?;
        Ok(j.clone())
    }
}
