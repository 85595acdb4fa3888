//! [`crate::store::JobQueue`] on PostgreSQL: enqueueing relies on the partial unique index
//! `jobs_one_open_per_document`.

use super::PgStore;
use crate::store::{jobs::JobRecord, StoreError, StoreResult};

/// How often `enqueue_job` tries again when the open job it met ended before it was read.
const ENQUEUE_TRIES: usize = 8;

crate::store::jobs::job_store!(PgStore, sqlx::Postgres, pool, pool);

/// [`crate::store::JobQueue::enqueue_job`]: insert, or else read the open job.
async fn enqueue_job(store: &PgStore, j: &JobRecord) -> StoreResult<JobRecord> {
    // The partial unique index `jobs_one_open_per_document` lets one queued or running
    // job per document in: a second insert waits for the first one's commit and then
    // does nothing. The open job is then read; should it end between the two
    // statements, the insert is tried again.
    for _ in 0..ENQUEUE_TRIES {
        let inserted = shared::insert_job(
            &store.pool,
            j,
            " ON CONFLICT (document_id) WHERE status IN ('queued', 'running') DO NOTHING",
        )
        .await?;
        if inserted == 1 {
            return Ok(j.clone());
        }
        if let Some(open) = shared::open_job(&store.pool, &j.document_id).await? {
            return Ok(open);
        }
    }
    Err(StoreError::Other(anyhow::anyhow!(
        "the document's open job kept ending while a new one was queued"
    )))
}
