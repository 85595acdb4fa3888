//! Scheduled refreshes of crawled sites (docs/knowledge.md § Refresh). Every instance that
//! runs background work looks for due sites every [`POLL`]; for each it moves the site's
//! `next_refresh_at` one interval on with a compare-and-set
//! ([`crate::store::DocumentStore::claim_refresh`]), and only the scheduler whose move
//! succeeded queues the re-crawl, so a due refresh is queued once however many instances
//! look (and the one open job per document the queue allows would fold a second anyway).
//! The re-crawl is the manual refresh's: conditional requests and content hashes make an
//! unchanged page cost one request.

use std::time::Duration;

use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::Knowledge;
use crate::{
    ids::{DocumentId, UserId},
    store::{
        documents::{next_refresh, DocumentStatus},
        jobs::{JobKind, JobRecord, JobStatus},
        StoreError,
    },
};

/// How often each instance looks for due refreshes.
pub const POLL: Duration = Duration::from_secs(30);
/// Due documents read per query.
const BATCH: u32 = 100;
/// Queries per pass at most (a pass queues up to `BATCH * PASS_BATCHES` refreshes).
const PASS_BATCHES: usize = 10;

/// Starts this instance's scheduler: a pass at once, then one every [`POLL`].
pub fn spawn(k: Knowledge) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            if let Err(err) = queue_due(&k).await {
                warn!(error = %err, "cannot queue due refreshes; trying again later");
            }
            tokio::time::sleep(POLL).await;
        }
    })
}

/// Queues a re-crawl of every site whose refresh is due at the clock's now, each claimed by
/// moving its `next_refresh_at` to now plus its interval; answers how many this call queued
/// (claims another scheduler won are left to it). Errors: the store's (claims made before
/// it stand).
pub async fn queue_due(k: &Knowledge) -> Result<usize, StoreError> {
    let now = k.clock.now();
    let mut queued = 0;
    for _ in 0..PASS_BATCHES {
        let due = k.documents.due_refreshes(now, BATCH).await?;
        let full = due.len() == BATCH as usize;
        for d in due {
            let next = next_refresh(now, d.refresh_hours);
            if !k
                .documents
                .claim_refresh(&d.id, d.next_refresh_at, next)
                .await?
            {
                continue;
            }
            let job = queue(k, &d.id, JobKind::Crawl, &d.user_id).await?;
            info!(document = %d.id, job = %job.id, "scheduled refresh queued");
            queued += 1;
        }
        if !full {
            break;
        }
    }
    Ok(queued)
}

/// Queues a job of `kind` for `user_id`'s document, or answers its open one; a queued job
/// sets the document `pending` (its chunks stay searchable until pages are replaced). The
/// one path of manual and scheduled refreshes.
pub(crate) async fn queue(
    k: &Knowledge,
    document_id: &DocumentId,
    kind: JobKind,
    user_id: &UserId,
) -> Result<JobRecord, StoreError> {
    let job = k
        .jobs
        .enqueue_job(&JobRecord::queued(
            kind,
            document_id,
            user_id,
            k.clock.now(),
        ))
        .await?;
    if job.status == JobStatus::Queued {
        k.documents
            .set_document_status(document_id, DocumentStatus::Pending, None, k.clock.now())
            .await?;
    }
    k.job_queued();
    Ok(job)
}
