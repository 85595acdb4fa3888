//! [`crate::store::JobQueue`] on PostgreSQL, shared by the workers of every instance: claims
//! use `FOR UPDATE SKIP LOCKED`, ends are fenced by the claimed attempt, and the partial
//! unique index `jobs_one_open_per_document` keeps one open job per document.

use super::{
    rows::{job, JOB_COLUMNS},
    PgStore,
};
use crate::ids::DocumentId;
use crate::store::{
    jobs::{JobRecord, JobStatus},
    StoreError, StoreResult,
};

/// How often `enqueue_job` tries again when the open job it collided with ended before it
/// could be read.
const ENQUEUE_TRIES: usize = 8;

/// Locks the job's document `FOR NO KEY UPDATE`; false when it is gone.
async fn lock_document(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    document_id: &DocumentId,
) -> Result<bool, sqlx::Error> {
    // The document first, as a delete of it takes it before the job it cascades to:
    // the same lock order, so the two never deadlock. A deleted document took its job.
    let live: Option<i32> =
        sqlx::query_scalar("SELECT 1 FROM documents WHERE id = $1 FOR NO KEY UPDATE")
            .bind(document_id)
            .fetch_optional(&mut **tx)
            .await?;
    Ok(live.is_some())
}

/// The subquery skips rows another claim has locked; the outer `WHERE` repeats its
/// predicate, or two workers could take the same job under read committed.
const CLAIM_JOB: &str = "UPDATE jobs SET status = $1, lease_until = $2, attempts = attempts + 1, \
     started_at = COALESCE(started_at, $3) \
     WHERE id = (SELECT id FROM jobs WHERE status = $4 \
                 OR (status = $1 AND lease_until < $3) ORDER BY created_at, id LIMIT 1 \
                 FOR UPDATE SKIP LOCKED) \
     AND (status = $4 OR (status = $1 AND lease_until < $3))";

crate::store::jobs::job_store!(PgStore, sqlx::Postgres, pool, pool);
pub(super) use shared::insert_job;

/// Claimers of every instance run side by side (the module's rules).
impl PgStore {
    /// [`crate::store::JobQueue::enqueue_job`]: insert unless the partial unique index holds an open job, then
    /// read it.
    async fn own_enqueue_job(&self, j: &JobRecord) -> StoreResult<JobRecord> {
        // The partial unique index `jobs_one_open_per_document` lets one queued or running
        // job per document in: a second insert waits for the first one's commit and then
        // does nothing. The open job is then read; should it end between the two
        // statements, the insert is tried again.
        for _ in 0..ENQUEUE_TRIES {
            let inserted = insert_job(
                &self.pool,
                j,
                " ON CONFLICT (document_id) WHERE status IN ('queued', 'running') DO NOTHING",
            )
            .await?;
            if inserted == 1 {
                return Ok(j.clone());
            }
            let open = sqlx::query(&format!(
                "SELECT {JOB_COLUMNS} FROM jobs WHERE document_id = $1 AND status IN ($2, $3) \
                 ORDER BY created_at LIMIT 1"
            ))
            .bind(&j.document_id)
            .bind(JobStatus::Queued)
            .bind(JobStatus::Running)
            .fetch_optional(&self.pool)
            .await?;
            if let Some(row) = open {
                return Ok(job(&row)?);
            }
        }
        Err(StoreError::Other(anyhow::anyhow!(
            "the document's open job kept ending while a new one was queued"
        )))
    }
}
