//! Cases of scheduled refreshes of crawled sites: the due-time claim, the schedule moved
//! by a job's end, and the pages' validators and links.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};

use super::{crawled_document, in_parallel, page};
use agentchat::store::{
    documents::{PageRecord, RefreshCounts},
    from_millis,
    jobs::JobOutcome,
    Store,
};

/// Now, at the stored precision (milliseconds).
fn now_ms() -> DateTime<Utc> {
    from_millis(Utc::now().timestamp_millis())
}

/// [`agentchat::store::DocumentStore::claim_refresh`]: of eight schedulers that saw the same
/// due refresh, exactly one moves it on; afterwards it is no longer due.
pub async fn a_due_refresh_is_claimed_by_one_of_parallel_schedulers(store: Arc<dyn Store>) {
    let doc = crawled_document(store.as_ref()).await;
    let now = now_ms();
    let due = now - Duration::minutes(1);
    assert!(store
        .set_refresh_schedule(
            &doc.user_id,
            &doc.agent_id,
            &doc.id,
            Some(24),
            Some(due),
            now
        )
        .await
        .unwrap());
    let found = store.due_refreshes(now, 10).await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(
        (
            found[0].id.clone(),
            found[0].next_refresh_at,
            found[0].refresh_hours
        ),
        (doc.id.clone(), due, 24)
    );
    let wins = in_parallel(8, |_| {
        let store = store.clone();
        let d = found[0].clone();
        async move {
            let next = now + Duration::hours(i64::from(d.refresh_hours));
            store
                .claim_refresh(&d.id, d.next_refresh_at, next)
                .await
                .unwrap()
        }
    })
    .await;
    assert_eq!(wins.iter().filter(|w| **w).count(), 1, "{wins:?}");
    assert!(store.due_refreshes(now, 10).await.unwrap().is_empty());
    let d = store.document_by_id(&doc.id).await.unwrap().unwrap();
    assert_eq!(d.next_refresh_at, Some(now + Duration::hours(24)));
    // Off: never due, however late.
    assert!(store
        .set_refresh_schedule(&doc.user_id, &doc.agent_id, &doc.id, None, None, now)
        .await
        .unwrap());
    let later = now + Duration::days(400);
    assert!(store.due_refreshes(later, 10).await.unwrap().is_empty());
    // Another user's document is not found.
    let other = agentchat::ids::UserId::from("someone-else");
    assert!(!store
        .set_refresh_schedule(&other, &doc.agent_id, &doc.id, Some(1), Some(now), now)
        .await
        .unwrap());
}

/// [`agentchat::store::JobQueue::complete_job`]: a job's end moves a scheduled document's
/// next refresh to the job's first start plus the interval, whether it succeeded or failed;
/// a refresh's counts are stored with its end; a failure keeps the chunks.
pub async fn a_jobs_end_moves_the_schedule_from_its_start(store: Arc<dyn Store>) {
    let doc = crawled_document(store.as_ref()).await;
    let t0 = now_ms();
    assert!(store
        .set_refresh_schedule(&doc.user_id, &doc.agent_id, &doc.id, Some(6), Some(t0), t0)
        .await
        .unwrap());
    assert!(store
        .replace_pages(&doc.id, &[page("https://example.com/a", &["apple"])], t0)
        .await
        .unwrap());
    let start = t0 + Duration::seconds(5);
    let job = store
        .claim_job(start, start + Duration::seconds(60))
        .await
        .unwrap()
        .expect("the crawl job");
    let counts = RefreshCounts {
        added: 1,
        changed: 2,
        removed: 3,
        unchanged: 4,
    };
    let end = start + Duration::seconds(30);
    let indexed = JobOutcome::Indexed {
        pages: Some(1),
        bytes: 5,
        progress: (1, 1),
        refresh: Some(counts),
    };
    assert!(store.complete_job(&job, indexed, end).await.unwrap());
    let d = store.document_by_id(&doc.id).await.unwrap().unwrap();
    assert_eq!(d.next_refresh_at, Some(start + Duration::hours(6)));
    assert_eq!(d.last_refreshed_at, Some(end));
    assert_eq!(d.refresh_counts, Some(counts));

    // A failed refresh: the schedule moves on from its start, the chunks and the last
    // refresh's counts stay.
    let retry = agentchat::store::jobs::JobRecord::queued(
        agentchat::store::jobs::JobKind::Crawl,
        &doc.id,
        &doc.user_id,
        end,
    );
    store.enqueue_job(&retry).await.unwrap();
    let start = end + Duration::hours(1);
    let job = store
        .claim_job(start, start + Duration::seconds(60))
        .await
        .unwrap()
        .expect("the refresh job");
    let failed = JobOutcome::Failed {
        reason: "The site could not be crawled",
    };
    assert!(store
        .complete_job(&job, failed, start + Duration::seconds(1))
        .await
        .unwrap());
    let d = store.document_by_id(&doc.id).await.unwrap().unwrap();
    assert_eq!(d.next_refresh_at, Some(start + Duration::hours(6)));
    assert_eq!(d.last_refreshed_at, Some(end));
    assert_eq!(d.refresh_counts, Some(counts));
    assert_eq!(d.chunks, 1, "the chunks stay");
}

/// [`agentchat::store::DocumentStore::update_pages`]: a page's validators, links and size are
/// stored and read back; rewriting them leaves its chunks as they are.
pub async fn a_pages_validators_and_links_are_kept_without_touching_its_chunks(
    store: Arc<dyn Store>,
) {
    let doc = crawled_document(store.as_ref()).await;
    let now = now_ms();
    let (mut record, chunks) = page("https://example.com/a", &["apple", "apricot"]);
    record.fetch_url = Some("https://example.com/a?from=nav".into());
    record.etag = Some("\"v1\"".into());
    record.last_modified = Some("Sun, 29 Nov 2026 10:00:00 GMT".into());
    record.links = vec![
        "https://example.com/b".into(),
        "https://example.com/c".into(),
    ];
    record.bytes = 42;
    assert!(store
        .replace_pages(&doc.id, &[(record.clone(), chunks)], now)
        .await
        .unwrap());
    assert_eq!(
        store.document_pages(&doc.id).await.unwrap(),
        vec![record.clone()]
    );
    let before = store
        .chunks_after(&doc.agent_id, 0.into(), 10)
        .await
        .unwrap();
    assert_eq!(before.len(), 2);

    let updated = PageRecord {
        etag: Some("\"v2\"".into()),
        links: vec!["https://example.com/b".into()],
        ..record
    };
    assert!(store
        .update_pages(&doc.id, std::slice::from_ref(&updated), now)
        .await
        .unwrap());
    assert_eq!(
        store.document_pages(&doc.id).await.unwrap(),
        vec![updated.clone()]
    );
    assert_eq!(
        store
            .chunks_after(&doc.agent_id, 0.into(), 10)
            .await
            .unwrap(),
        before,
        "the same chunks, ids and all"
    );
    assert!(store
        .delete_document(&doc.user_id, &doc.agent_id, &doc.id)
        .await
        .unwrap());
    assert!(!store.update_pages(&doc.id, &[updated], now).await.unwrap());
}
