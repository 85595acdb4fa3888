//! The durable queue of knowledge jobs, with leases ([`JobQueue`]).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::{documents::RefreshCounts, StoreResult};
use crate::ids::{DocumentId, JobId, UserId};

/// A knowledge job's state (docs/api.md § States and transitions).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, sqlx::Type,
)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "TEXT", rename_all = "lowercase")]
pub enum JobStatus {
    /// Waiting for a worker: set when the job is queued ([`JobQueue::enqueue_job`]).
    Queued,
    /// A worker holds its lease ([`JobQueue::claim_job`]).
    Running,
    /// Finished; its document is indexed ([`JobQueue::complete_job`]).
    Succeeded,
    /// Gave up; `error` says why.
    Failed,
}

impl JobStatus {
    pub const ALL: [Self; 4] = [Self::Queued, Self::Running, Self::Succeeded, Self::Failed];

    /// The stored and wire text: `queued`, `running`, `succeeded` or `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
        }
    }
}

impl std::fmt::Display for JobStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a knowledge job does (docs/api.md § Documents and jobs, `kind`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, sqlx::Type,
)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "TEXT", rename_all = "lowercase")]
pub enum JobKind {
    /// Extract, chunk and index an uploaded file.
    Ingest,
    /// Crawl a site and index its pages.
    Crawl,
}

impl JobKind {
    pub const ALL: [Self; 2] = [Self::Ingest, Self::Crawl];

    /// The stored and wire text: `ingest` or `crawl`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ingest => "ingest",
            Self::Crawl => "crawl",
        }
    }
}

impl std::fmt::Display for JobKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A background job (ingestion of an upload or a crawl).
#[derive(Debug, Clone, PartialEq)]
pub struct JobRecord {
    pub id: JobId,
    pub kind: JobKind,
    pub document_id: DocumentId,
    pub user_id: UserId,
    pub status: JobStatus,
    pub progress_done: u32,
    pub progress_total: u32,
    pub error: Option<String>,
    /// Times a worker has started it (a restart after a crash counts).
    pub attempts: u32,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl JobRecord {
    /// A new job of `kind` for `user_id`'s document, queued at `now`, with a UUIDv7 id.
    pub fn queued(
        kind: JobKind,
        document_id: &DocumentId,
        user_id: &UserId,
        now: DateTime<Utc>,
    ) -> Self {
        Self {
            id: JobId::new(),
            kind,
            document_id: document_id.clone(),
            user_id: user_id.clone(),
            status: JobStatus::Queued,
            progress_done: 0,
            progress_total: 0,
            error: None,
            attempts: 0,
            created_at: now,
            started_at: None,
            finished_at: None,
        }
    }
}

/// How a job ended, for [`JobQueue::complete_job`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobOutcome<'a> {
    /// The document is searchable.
    Indexed {
        /// Pages crawled (url documents) or read (PDF).
        pages: Option<u32>,
        /// Size of the upload, or of the crawled pages' text, in bytes.
        bytes: u64,
        /// The job's final progress: units done, of total.
        progress: (u32, u32),
        /// A crawl's page counts, stored with the time as the document's last refresh.
        refresh: Option<RefreshCounts>,
    },
    /// Indexing gave up; the sentence for the document's and the job's `error`.
    Failed {
        /// Why, for the user.
        reason: &'a str,
    },
}

/// The queue of knowledge jobs. Methods taking a user id are tenant-scoped.
#[async_trait]
pub trait JobQueue: Send + Sync {
    /// Queues a job unless the document has an open one, atomically; answers the job that
    /// will do the work.
    async fn enqueue_job(&self, job: &JobRecord) -> StoreResult<JobRecord>;
    /// Takes the oldest queued job, or one whose lease ran out, running until `lease_until`,
    /// its attempt (the fence) counted; one claimer per job under any concurrency.
    async fn claim_job(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<Option<JobRecord>>;
    /// Records progress and extends the lease while claim `attempt` holds the job; `false`
    /// (nothing written) when the claim is lost.
    async fn job_progress(
        &self,
        id: &JobId,
        attempt: u32,
        done: u32,
        total: u32,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Ends claim `job.attempts` and the job's document together as `outcome` says; `false`
    /// (nothing written) when the claim is lost. Either way a document with a refresh
    /// schedule is next due at the job's first start plus its interval (docs/knowledge.md §
    /// Refresh); a crawl's counts are stored with `now` as its last refresh.
    async fn complete_job(
        &self,
        job: &JobRecord,
        outcome: JobOutcome<'_>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Ends the job as `status` while claim `attempt` holds it; `false` when lost.
    async fn finish_job(
        &self,
        id: &JobId,
        attempt: u32,
        status: JobStatus,
        error: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// A job of the user.
    async fn job(&self, user_id: &UserId, id: &JobId) -> StoreResult<Option<JobRecord>>;
    /// How many jobs of each kind are queued (kinds with none left out).
    async fn queued_jobs(&self) -> StoreResult<Vec<(JobKind, u64)>>;
}

/// Defines the [`JobQueue`] of `$store` (`$writer` pool writes, `$reader` reads) over the
/// invoking file's `enqueue_job`.
macro_rules! job_store {
    ($store:ident, $db:ty, $writer:ident, $reader:ident) => {
        pub(super) mod shared {
            use chrono::{DateTime, Utc};

            use super::super::{
                documents::shared::mark_indexed,
                rows::{job, ms, JOB_COLUMNS},
                $store,
            };
            use super::super::row_lock;
            use crate::ids::{DocumentId, JobId, UserId};
            use crate::store::{
                documents::DocumentStatus,
                jobs::{JobKind, JobOutcome, JobQueue, JobRecord, JobStatus},
                StoreResult,
            };

            /// Locks the job's document (before the job, as a delete does); false when gone.
            async fn lock_document(
                tx: &mut sqlx::Transaction<'_, $db>,
                document_id: &DocumentId,
            ) -> Result<bool, sqlx::Error> {
                let sql = format!(
                    "SELECT 1 FROM documents WHERE id = $1{}",
                    row_lock(" FOR NO KEY UPDATE")
                );
                let live: Option<i32> = sqlx::query_scalar(&sql)
                    .bind(document_id)
                    .fetch_optional(&mut **tx)
                    .await?;
                Ok(live.is_some())
            }

            /// The document's open (queued or running) job, the oldest, through `executor`.
            pub(crate) async fn open_job<'e>(
                executor: impl sqlx::Executor<'e, Database = $db>,
                document_id: &DocumentId,
            ) -> Result<Option<JobRecord>, sqlx::Error> {
                let row = sqlx::query(&format!(
                    "SELECT {JOB_COLUMNS} FROM jobs WHERE document_id = $1 AND status IN ($2, $3) \
                     ORDER BY created_at LIMIT 1"
                ))
                .bind(document_id)
                .bind(JobStatus::Queued)
                .bind(JobStatus::Running)
                .fetch_optional(executor)
                .await?;
                row.as_ref().map(job).transpose()
            }

            /// Inserts the job `j`, the statement ending with `on_conflict`; answers the rows.
            pub(crate) async fn insert_job<'e>(
                executor: impl sqlx::Executor<'e, Database = $db>,
                j: &JobRecord,
                on_conflict: &str,
            ) -> Result<u64, sqlx::Error> {
                Ok(sqlx::query(&format!(
                    "INSERT INTO jobs ({JOB_COLUMNS}) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12){on_conflict}"
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
                .execute(executor)
                .await?
                .rows_affected())
            }

            #[async_trait::async_trait]
            impl JobQueue for $store {
                async fn enqueue_job(&self, j: &JobRecord) -> StoreResult<JobRecord> {
                    super::enqueue_job(self, j).await
                }

                async fn claim_job(
                    &self,
                    now: DateTime<Utc>,
                    lease_until: DateTime<Utc>,
                ) -> StoreResult<Option<JobRecord>> {
                    // Where claimers run side by side, the subquery skips rows another claim
                    // has locked and the outer `WHERE` repeats its predicate, or two workers
                    // could take the same job under read committed.
                    let sql = format!(
                        "UPDATE jobs SET status = $1, lease_until = $2, attempts = attempts + 1, \
                         started_at = COALESCE(started_at, $3) \
                         WHERE id = (SELECT id FROM jobs WHERE status = $4 \
                         OR (status = $1 AND lease_until < $3) ORDER BY created_at, id LIMIT 1{}) \
                         AND (status = $4 OR (status = $1 AND lease_until < $3)) \
                         RETURNING {JOB_COLUMNS}",
                        row_lock(" FOR UPDATE SKIP LOCKED")
                    );
                    let row = sqlx::query(&sql)
                        .bind(JobStatus::Running)
                        .bind(ms(lease_until))
                        .bind(ms(now))
                        .bind(JobStatus::Queued)
                        .fetch_optional(&self.$writer)
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
                    .execute(&self.$writer)
                    .await?;
                    Ok(done.rows_affected() == 1)
                }

                async fn complete_job(
                    &self,
                    job: &JobRecord,
                    outcome: JobOutcome<'_>,
                    now: DateTime<Utc>,
                ) -> StoreResult<bool> {
                    let mut tx = self.begin_write().await?;
                    if !lock_document(&mut tx, &job.document_id).await? {
                        return Ok(false);
                    }
                    let (job_status, error, done, total) = match outcome {
                        JobOutcome::Indexed {
                            progress: (done, total),
                            ..
                        } => (JobStatus::Succeeded, None, Some(done), Some(total)),
                        JobOutcome::Failed { reason } => {
                            (JobStatus::Failed, Some(reason), None, None)
                        }
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
                    let started = job.started_at.unwrap_or(now);
                    sqlx::query(
                        "UPDATE documents SET next_refresh_at = $1 + refresh_hours * 3600000 \
                         WHERE id = $2 AND refresh_hours IS NOT NULL",
                    )
                    .bind(ms(started))
                    .bind(&job.document_id)
                    .execute(&mut *tx)
                    .await?;
                    match outcome {
                        JobOutcome::Indexed {
                            pages,
                            bytes,
                            refresh,
                            ..
                        } => {
                            mark_indexed(&mut *tx, &job.document_id, pages, bytes, now).await?;
                            if let Some(counts) = refresh {
                                sqlx::query(
                                    "UPDATE documents SET last_refreshed_at = $1, refresh_counts = $2 \
                                     WHERE id = $3",
                                )
                                .bind(ms(now))
                                .bind(serde_json::to_string(&counts).map_err(|e| {
                                    crate::store::StoreError::Other(e.into())
                                })?)
                                .bind(&job.document_id)
                                .execute(&mut *tx)
                                .await?;
                            }
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
                    .execute(&self.$writer)
                    .await?;
                    Ok(done.rows_affected() == 1)
                }

                async fn job(
                    &self,
                    user_id: &UserId,
                    id: &JobId,
                ) -> StoreResult<Option<JobRecord>> {
                    let row = sqlx::query(&format!(
                        "SELECT {JOB_COLUMNS} FROM jobs WHERE user_id = $1 AND id = $2"
                    ))
                    .bind(user_id)
                    .bind(id)
                    .fetch_optional(&self.$reader)
                    .await?;
                    Ok(row.as_ref().map(job).transpose()?)
                }

                async fn queued_jobs(&self) -> StoreResult<Vec<(JobKind, u64)>> {
                    let rows: Vec<(JobKind, i64)> = sqlx::query_as(
                        "SELECT kind, COUNT(*) FROM jobs WHERE status = $1 GROUP BY kind",
                    )
                    .bind(JobStatus::Queued)
                    .fetch_all(&self.$reader)
                    .await?;
                    Ok(rows
                        .into_iter()
                        .map(|(kind, n)| (kind, u64::try_from(n).unwrap_or(0)))
                        .collect())
                }
            }
        }
    };
}
pub(crate) use job_store;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_states_and_kinds_are_the_stored_and_wire_text() {
        // The CHECK lists of `jobs.status` and `jobs.kind`
        // (migrations/sqlite/0003_knowledge.sql), and docs/api.md § Documents and jobs.
        let states: Vec<&str> = JobStatus::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(states, ["queued", "running", "succeeded", "failed"]);
        for s in JobStatus::ALL {
            let json = serde_json::to_value(s).unwrap();
            assert_eq!(json, s.as_str());
            assert_eq!(serde_json::from_value::<JobStatus>(json).unwrap(), s);
            assert_eq!(s.to_string(), s.as_str());
        }
        let kinds: Vec<&str> = JobKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(kinds, ["ingest", "crawl"]);
        for k in JobKind::ALL {
            let json = serde_json::to_value(k).unwrap();
            assert_eq!(json, k.as_str());
            assert_eq!(serde_json::from_value::<JobKind>(json).unwrap(), k);
            assert_eq!(k.to_string(), k.as_str());
        }
    }
}
