//! The job part of the persistence boundary: the durable queue of knowledge jobs
//! (ingestion of an upload, crawl of a site) with leases. Every backend implements
//! [`JobQueue`] (SQLite: `sqlite/jobs.rs`); [`super::Store`] requires it.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::StoreResult;
use crate::ids::{DocumentId, JobId, UserId};

/// A knowledge job's state (docs/api.md § States and transitions): `queued` → `running` →
/// `succeeded` or `failed`; a `running` job whose lease ran out is taken again. Stored and
/// answered as its text ([`JobStatus::as_str`]).
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
    /// Gave up; `error` says why ([`JobQueue::complete_job`], or the worker after
    /// `MAX_ATTEMPTS` interruptions).
    Failed,
}

impl JobStatus {
    /// Every state, in the order of docs/api.md § States and transitions.
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

/// What a knowledge job does (docs/api.md § Documents and jobs, `kind`); stored and
/// answered as its text, and follows from the document's source.
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
    /// Both kinds.
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
    /// Queues a job (a refresh) unless one for the document is already queued or running,
    /// and returns the job that will do the work. Check and insert are one atomic step, so
    /// a document never has two queued or running jobs.
    async fn enqueue_job(&self, job: &JobRecord) -> StoreResult<JobRecord>;
    /// Takes the oldest queued job, or a running one whose lease ran out, marks it running
    /// until `lease_until` and counts the attempt, which fences its completion. One claimer
    /// per job under any concurrency (a server backend under read committed needs `FOR
    /// UPDATE SKIP LOCKED` and the status predicate repeated in the outer `WHERE`).
    async fn claim_job(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<Option<JobRecord>>;
    /// Records progress and extends the lease while the claim `attempt` still holds the job.
    /// `false` (nothing written) when the claim is lost: the worker must stop without
    /// recording the job's end (docs/api.md § Documents and jobs).
    async fn job_progress(
        &self,
        id: &JobId,
        attempt: u32,
        done: u32,
        total: u32,
        lease_until: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Ends the claim `job.attempts` of a running job and its document in one transaction
    /// (no reader sees the document ended while its job runs): [`JobOutcome::Indexed`]
    /// finishes the document as `DocumentStore::finish_document` does and the job
    /// `succeeded`; [`JobOutcome::Failed`] fails both with the reason. `false` (nothing
    /// written) when the claim is lost.
    async fn complete_job(
        &self,
        job: &JobRecord,
        outcome: JobOutcome<'_>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Ends the job as `status` while the claim `attempt` still holds it, leaving its
    /// document as is; `false` (nothing written) when the claim is lost.
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
    /// How many jobs of each kind are queued, for the `agentchat_knowledge_queue_depth`
    /// metric (README § Metrics); kinds with none are left out.
    async fn queued_jobs(&self) -> StoreResult<Vec<(JobKind, u64)>>;
}

/// Defines, in a private module `shared` of the invoking backend file, the [`JobQueue`]
/// implementation of `$store` (`$writer` pool writes, `$reader` reads) and `insert_job`.
/// The invoking file supplies `lock_document` (false when the document is gone),
/// `CLAIM_JOB` (the claim's `UPDATE` without `RETURNING`: `$1` running, `$2` lease end,
/// `$3` now, `$4` queued) and `own_enqueue_job`; its `rows` and `documents` modules give
/// the row mappers and `mark_indexed`.
macro_rules! job_store {
    ($store:ident, $db:ty, $writer:ident, $reader:ident) => {
        mod shared {
            use chrono::{DateTime, Utc};

            use super::super::{
                documents::mark_indexed,
                rows::{job, ms, JOB_COLUMNS},
                $store,
            };
            use super::{lock_document, CLAIM_JOB};
            use crate::ids::{JobId, UserId};
            use crate::store::{
                documents::DocumentStatus,
                jobs::{JobKind, JobOutcome, JobQueue, JobRecord, JobStatus},
                StoreResult,
            };

            /// Inserts the job `j` through `executor`, the statement ending with `on_conflict`
            /// (empty, or an `ON CONFLICT` clause); answers the rows inserted.
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
                    self.own_enqueue_job(j).await
                }

                async fn claim_job(
                    &self,
                    now: DateTime<Utc>,
                    lease_until: DateTime<Utc>,
                ) -> StoreResult<Option<JobRecord>> {
                    let row = sqlx::query(&format!("{CLAIM_JOB} RETURNING {JOB_COLUMNS}"))
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
