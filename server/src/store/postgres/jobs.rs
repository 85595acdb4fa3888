//! [`JobQueue`] on PostgreSQL: the durable job queue with leases
//! (`migrations/postgres/0001_baseline.sql`), shared by the workers of every instance.
//! Claims take rows with `FOR UPDATE SKIP LOCKED`; progress, completion and finishing are
//! fenced by the claimed attempt; a document's one open job is kept by the partial unique
//! index `jobs_one_open_per_document`.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{
    begin,
    documents::mark_indexed,
    rows::{job, ms, JOB_COLUMNS},
    PgStore,
};
use crate::ids::{JobId, UserId};
use crate::store::{
    documents::DocumentStatus,
    jobs::{JobKind, JobOutcome, JobQueue, JobRecord, JobStatus},
    StoreError, StoreResult,
};

/// How often [`JobQueue::enqueue_job`] tries again when the open job it collided with
/// ended before it could be read (each try is two statements; more than a couple of tries
/// means the document's jobs end as fast as they are queued).
const ENQUEUE_TRIES: usize = 8;

#[async_trait]
impl JobQueue for PgStore {
    async fn enqueue_job(&self, j: &JobRecord) -> StoreResult<JobRecord> {
        // The partial unique index `jobs_one_open_per_document` lets one queued or running
        // job per document in: a second insert waits for the first one's commit and then
        // does nothing. The open job is then read; should it end between the two
        // statements, the insert is tried again.
        for _ in 0..ENQUEUE_TRIES {
            let inserted = sqlx::query(&format!(
                "INSERT INTO jobs ({JOB_COLUMNS}) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
                 ON CONFLICT (document_id) WHERE status IN ('queued', 'running') DO NOTHING"
            ))
            .bind(&j.id)
            .bind(j.kind)
            .bind(&j.document_id)
            .bind(&j.user_id)
            .bind(j.status)
            .bind(i64::from(j.progress_done))
            .bind(i64::from(j.progress_total))
            .bind(&j.error)
            .bind(i64::from(j.attempts))
            .bind(ms(j.created_at))
            .bind(j.started_at.map(ms))
            .bind(j.finished_at.map(ms))
            .execute(&self.pool)
            .await?
            .rows_affected();
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

    async fn claim_job(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<Option<JobRecord>> {
        // The subquery skips rows another claim has locked, and the outer WHERE repeats
        // its predicate: under read committed a row re-read after a lock wait must still
        // be due, or two workers would take the same job.
        let row = sqlx::query(&format!(
            "UPDATE jobs SET status = $1, lease_until = $2, attempts = attempts + 1, \
             started_at = COALESCE(started_at, $3) \
             WHERE id = (SELECT id FROM jobs WHERE status = $4 \
                         OR (status = $1 AND lease_until < $3) ORDER BY created_at, id LIMIT 1 \
                         FOR UPDATE SKIP LOCKED) \
             AND (status = $4 OR (status = $1 AND lease_until < $3)) \
             RETURNING {JOB_COLUMNS}"
        ))
        .bind(JobStatus::Running)
        .bind(ms(lease_until))
        .bind(ms(now))
        .bind(JobStatus::Queued)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(job).transpose()?)
    }

    async fn job_progress(
        &self,
        id: &JobId,
        attempt: u32,
        done: u32,
        total: u32,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE jobs SET progress_done = $1, progress_total = $2, lease_until = $3 \
             WHERE id = $4 AND status = $5 AND attempts = $6",
        )
        .bind(i64::from(done))
        .bind(i64::from(total))
        .bind(ms(lease_until))
        .bind(id)
        .bind(JobStatus::Running)
        .bind(i64::from(attempt))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn complete_job(
        &self,
        job: &JobRecord,
        outcome: JobOutcome<'_>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let mut tx = begin(&self.pool).await?;
        // The document first, as a delete of it takes it before the job it cascades to:
        // the same lock order, so the two never deadlock. A deleted document took its job.
        let live: Option<i32> =
            sqlx::query_scalar("SELECT 1 FROM documents WHERE id = $1 FOR NO KEY UPDATE")
                .bind(&job.document_id)
                .fetch_optional(&mut *tx)
                .await?;
        if live.is_none() {
            return Ok(false);
        }
        let (job_status, error, done, total) = match outcome {
            JobOutcome::Indexed {
                progress: (done, total),
                ..
            } => (JobStatus::Succeeded, None, Some(done), Some(total)),
            JobOutcome::Failed { reason } => (JobStatus::Failed, Some(reason), None, None),
        };
        let ended = sqlx::query(
            "UPDATE jobs SET status = $1, error = $2, finished_at = $3, lease_until = NULL, \
             progress_done = coalesce($4, progress_done), \
             progress_total = coalesce($5, progress_total) \
             WHERE id = $6 AND status = $7 AND attempts = $8",
        )
        .bind(job_status)
        .bind(error)
        .bind(ms(now))
        .bind(done.map(i64::from))
        .bind(total.map(i64::from))
        .bind(&job.id)
        .bind(JobStatus::Running)
        .bind(i64::from(job.attempts))
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if ended == 0 {
            return Ok(false);
        }
        match outcome {
            JobOutcome::Indexed { pages, bytes, .. } => {
                mark_indexed(&mut *tx, &job.document_id, pages, bytes, now).await?;
            }
            JobOutcome::Failed { reason } => {
                sqlx::query(
                    "UPDATE documents SET status = $1, error = $2, updated_at = $3 WHERE id = $4",
                )
                .bind(DocumentStatus::Failed)
                .bind(reason)
                .bind(ms(now))
                .bind(&job.document_id)
                .execute(&mut *tx)
                .await?;
            }
        }
        tx.commit().await?;
        Ok(true)
    }

    async fn finish_job(
        &self,
        id: &JobId,
        attempt: u32,
        status: JobStatus,
        error: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let done = sqlx::query(
            "UPDATE jobs SET status = $1, error = $2, finished_at = $3, lease_until = NULL \
             WHERE id = $4 AND status = $5 AND attempts = $6",
        )
        .bind(status)
        .bind(error)
        .bind(ms(now))
        .bind(id)
        .bind(JobStatus::Running)
        .bind(i64::from(attempt))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn job(&self, user_id: &UserId, id: &JobId) -> StoreResult<Option<JobRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE user_id = $1 AND id = $2"
        ))
        .bind(user_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(job).transpose()?)
    }

    async fn queued_jobs(&self) -> StoreResult<Vec<(JobKind, u64)>> {
        let rows: Vec<(JobKind, i64)> =
            sqlx::query_as("SELECT kind, COUNT(*) FROM jobs WHERE status = $1 GROUP BY kind")
                .bind(JobStatus::Queued)
                .fetch_all(&self.pool)
                .await?;
        Ok(rows
            .into_iter()
            .map(|(kind, n)| (kind, u64::try_from(n).unwrap_or(0)))
            .collect())
    }
}

pub(super) async fn insert_job(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    j: &JobRecord,
) -> Result<(), sqlx::Error> {
    sqlx::query(&format!(
        "INSERT INTO jobs ({JOB_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
    ))
    .bind(&j.id)
    .bind(j.kind)
    .bind(&j.document_id)
    .bind(&j.user_id)
    .bind(j.status)
    .bind(i64::from(j.progress_done))
    .bind(i64::from(j.progress_total))
    .bind(&j.error)
    .bind(i64::from(j.attempts))
    .bind(ms(j.created_at))
    .bind(j.started_at.map(ms))
    .bind(j.finished_at.map(ms))
    .execute(&mut **tx)
    .await?;
    Ok(())
}
