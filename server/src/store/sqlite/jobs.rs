//! [`JobQueue`] on SQLite: the durable job queue with leases
//! (`migrations/sqlite/0003_knowledge.sql`).
//!
//! Write transactions start with `BEGIN IMMEDIATE` (see `sqlite/documents.rs`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{
    documents::mark_indexed,
    rows::{job, ms, JOB_COLUMNS},
    SqliteStore,
};
use crate::ids::{JobId, UserId};
use crate::store::{
    documents::DocumentStatus,
    jobs::{JobKind, JobOutcome, JobQueue, JobRecord, JobStatus},
    StoreResult,
};

#[async_trait]
impl JobQueue for SqliteStore {
    async fn enqueue_job(&self, j: &JobRecord) -> StoreResult<JobRecord> {
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await?;
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
        insert_job(&mut tx, j).await?;
        tx.commit().await?;
        Ok(j.clone())
    }

    async fn claim_job(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<Option<JobRecord>> {
        // One statement, so two workers cannot take the same job.
        let row = sqlx::query(&format!(
            "UPDATE jobs SET status = ?1, lease_until = ?2, attempts = attempts + 1, \
             started_at = COALESCE(started_at, ?3) \
             WHERE id = (SELECT id FROM jobs WHERE status = ?4 \
                         OR (status = ?1 AND lease_until < ?3) ORDER BY created_at, id LIMIT 1) \
             RETURNING {JOB_COLUMNS}"
        ))
        .bind(JobStatus::Running)
        .bind(ms(lease_until))
        .bind(ms(now))
        .bind(JobStatus::Queued)
        .fetch_optional(&self.writer)
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
            "UPDATE jobs SET progress_done = ?, progress_total = ?, lease_until = ? \
             WHERE id = ? AND status = ? AND attempts = ?",
        )
        .bind(i64::from(done))
        .bind(i64::from(total))
        .bind(ms(lease_until))
        .bind(id)
        .bind(JobStatus::Running)
        .bind(i64::from(attempt))
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn complete_job(
        &self,
        job: &JobRecord,
        outcome: JobOutcome<'_>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await?;
        let (job_status, error, done, total) = match outcome {
            JobOutcome::Indexed {
                progress: (done, total),
                ..
            } => (JobStatus::Succeeded, None, Some(done), Some(total)),
            JobOutcome::Failed { reason } => (JobStatus::Failed, Some(reason), None, None),
        };
        let ended = sqlx::query(
            "UPDATE jobs SET status = ?, error = ?, finished_at = ?, lease_until = NULL, \
             progress_done = coalesce(?, progress_done), \
             progress_total = coalesce(?, progress_total) \
             WHERE id = ? AND status = ? AND attempts = ?",
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
                    "UPDATE documents SET status = ?, error = ?, updated_at = ? WHERE id = ?",
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
            "UPDATE jobs SET status = ?, error = ?, finished_at = ?, lease_until = NULL \
             WHERE id = ? AND status = ? AND attempts = ?",
        )
        .bind(status)
        .bind(error)
        .bind(ms(now))
        .bind(id)
        .bind(JobStatus::Running)
        .bind(i64::from(attempt))
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn job(&self, user_id: &UserId, id: &JobId) -> StoreResult<Option<JobRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE user_id = ? AND id = ?"
        ))
        .bind(user_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(job).transpose()?)
    }

    async fn queued_jobs(&self) -> StoreResult<Vec<(JobKind, u64)>> {
        let rows: Vec<(JobKind, i64)> =
            sqlx::query_as("SELECT kind, COUNT(*) FROM jobs WHERE status = ? GROUP BY kind")
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
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    j: &JobRecord,
) -> Result<(), sqlx::Error> {
    sqlx::query(&format!(
        "INSERT INTO jobs ({JOB_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
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
