//! Cases of the job queue, webhook deliveries and the per-account limits of webhooks and
//! integrations.

use std::{collections::HashSet, sync::Arc};

use chrono::{DateTime, Duration, Utc};

use super::{agent, in_parallel, integration, user};
use agentchat::domain::EventType;
use agentchat::{
    ids::{AgentId, IntegrationId, UserId},
    store::{
        documents::{DocumentRecord, DocumentStatus},
        jobs::{JobKind, JobOutcome, JobRecord, JobStatus},
        webhooks::{AfterAttempt, AttemptRecord, DeliveryStatus, WebhookRecord},
        Store,
    },
};

/// Creates user `u1` with agent `a1` and `n` uploaded documents `d0…`, each with its
/// queued ingestion job (queued one millisecond apart, in order); returns the jobs.
async fn queued_jobs(store: &dyn Store, n: usize, now: DateTime<Utc>) -> Vec<JobRecord> {
    let u1 = user(store, "u1").await.id;
    let a1 = agent(store, "a1", &u1).await.id;
    let mut jobs = Vec::with_capacity(n);
    for i in 0..n {
        let at = now + Duration::milliseconds(i as i64);
        let doc = DocumentRecord::pending_file(
            format!("d{i}").into(),
            &a1,
            &u1,
            format!("{i}.txt"),
            "text",
            10,
            at,
        );
        let job = JobRecord::queued(JobKind::Ingest, &doc.id, &u1, at);
        store.create_document(&doc, &job).await.unwrap();
        jobs.push(job);
    }
    jobs
}

/// [`agentchat::store::JobQueue::queued_jobs`]: the jobs waiting for a worker, by kind; a
/// claimed job no longer waits, and a kind without a queued job is left out.
pub async fn queued_jobs_are_counted_by_kind(store: Arc<dyn Store>) {
    let counted = |counts: Vec<(JobKind, u64)>, kind: JobKind| {
        counts
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(0, |(_, n)| *n)
    };
    assert!(store.queued_jobs().await.unwrap().is_empty());
    let now = Utc::now();
    let jobs = queued_jobs(store.as_ref(), 3, now).await;
    let a1 = AgentId::from("a1");
    let u1 = UserId::from("u1");
    super::crawl_document(store.as_ref(), "c1", &a1, &u1, "https://example.com/").await;
    let counts = store.queued_jobs().await.unwrap();
    assert_eq!(counted(counts.clone(), JobKind::Ingest), 3);
    assert_eq!(counted(counts.clone(), JobKind::Crawl), 1);
    assert_eq!(counts.len(), 2);
    let claimed = store
        .claim_job(now + Duration::seconds(1), now + Duration::seconds(60))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claimed.id, jobs[0].id, "the oldest first");
    let counts = store.queued_jobs().await.unwrap();
    assert_eq!(counted(counts.clone(), JobKind::Ingest), 2);
    assert_eq!(counted(counts, JobKind::Crawl), 1);
}

/// [`agentchat::store::JobQueue::claim_job`]: sixteen workers claiming at once over eight
/// queued jobs take eight distinct jobs, each on its first attempt; the other eight get
/// none.
pub async fn sixteen_claimers_over_eight_jobs_take_eight_distinct_jobs(store: Arc<dyn Store>) {
    let now = Utc::now();
    let jobs = queued_jobs(store.as_ref(), 8, now).await;
    let lease = now + Duration::seconds(60);
    let claims = in_parallel(16, |_| {
        let store = store.clone();
        async move { store.claim_job(now, lease).await.unwrap() }
    })
    .await;
    let claimed: Vec<JobRecord> = claims.into_iter().flatten().collect();
    let ids: HashSet<&str> = claimed.iter().map(|j| j.id.as_str()).collect();
    let queued: HashSet<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(claimed.len(), 8, "one claim per job");
    assert_eq!(ids, queued, "every job taken once");
    assert!(claimed
        .iter()
        .all(|j| j.attempts == 1 && j.status == JobStatus::Running));
    assert!(store.claim_job(now, lease).await.unwrap().is_none());
}

/// [`agentchat::store::JobQueue::claim_job`] and [`agentchat::store::JobQueue::complete_job`]: a
/// running job is claimed again only once its lease (extended by progress) has ended,
/// as a new attempt; only the attempt holding the job may complete it.
pub async fn a_claimed_job_is_claimed_again_only_after_its_lease(store: Arc<dyn Store>) {
    let t0 = Utc::now();
    let job = queued_jobs(store.as_ref(), 1, t0).await.remove(0);
    let at = |s: i64| t0 + Duration::seconds(s);
    let first = store.claim_job(at(0), at(60)).await.unwrap().unwrap();
    assert_eq!((first.id.as_str(), first.attempts), (job.id.as_str(), 1));
    assert!(store.claim_job(at(30), at(90)).await.unwrap().is_none());
    store
        .job_progress(&job.id, first.attempts, 1, 2, at(90))
        .await
        .unwrap();
    assert!(
        store.claim_job(at(70), at(130)).await.unwrap().is_none(),
        "progress extended the lease"
    );
    let second = store.claim_job(at(91), at(151)).await.unwrap().unwrap();
    assert_eq!((second.id.as_str(), second.attempts), (job.id.as_str(), 2));
    let indexed = JobOutcome::Indexed {
        pages: Some(1),
        bytes: 10,
        progress: (2, 2),
        refresh: None,
    };
    assert!(
        !store.complete_job(&first, indexed, at(95)).await.unwrap(),
        "the first attempt lost the job"
    );
    let doc = store
        .document_by_id(&job.document_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        doc.status,
        DocumentStatus::Pending,
        "nothing written by the lost attempt"
    );
    assert!(store.complete_job(&second, indexed, at(96)).await.unwrap());
    let doc = store
        .document_by_id(&job.document_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (doc.status, doc.pages, doc.bytes),
        (DocumentStatus::Indexed, Some(1), 10)
    );
    let done = store.job(&job.user_id, &job.id).await.unwrap().unwrap();
    assert_eq!(
        (done.status, done.progress_done, done.progress_total),
        (JobStatus::Succeeded, 2, 2)
    );
    let failed = JobOutcome::Failed { reason: "late" };
    assert!(!store.complete_job(&second, failed, at(97)).await.unwrap());
    assert!(store.claim_job(at(500), at(560)).await.unwrap().is_none());
}

/// [`agentchat::store::JobQueue::job_progress`] and [`agentchat::store::JobQueue::finish_job`]:
/// once another worker has claimed the job again, the attempt that lost it can neither
/// renew its lease, record progress nor end the job (each answers `false` and writes
/// nothing); the holding attempt can, until the job has ended; a job deleted with its
/// document answers `false` too.
pub async fn a_lost_claim_can_neither_renew_nor_end_its_job(store: Arc<dyn Store>) {
    let t0 = Utc::now();
    let job = queued_jobs(store.as_ref(), 1, t0).await.remove(0);
    let at = |s: i64| t0 + Duration::seconds(s);
    let stored = || {
        let (store, user, id) = (store.clone(), job.user_id.clone(), job.id.clone());
        async move { store.job(&user, &id).await.unwrap().unwrap() }
    };
    let first = store.claim_job(at(0), at(60)).await.unwrap().unwrap();
    assert!(store
        .job_progress(&job.id, first.attempts, 1, 4, at(60))
        .await
        .unwrap());
    // The first worker stalls past its lease; a second one takes the job.
    let second = store.claim_job(at(61), at(121)).await.unwrap().unwrap();
    assert_eq!(second.attempts, first.attempts + 1);
    assert!(
        !store
            .job_progress(&job.id, first.attempts, 3, 4, at(500))
            .await
            .unwrap(),
        "the lost claim's heartbeat is refused"
    );
    let now = stored().await;
    assert_eq!(
        (now.progress_done, now.progress_total),
        (1, 4),
        "nothing written by the lost claim"
    );
    assert!(
        store.claim_job(at(122), at(182)).await.unwrap().is_some(),
        "the lost claim did not extend the lease"
    );
    let third = stored().await;
    assert_eq!((third.status, third.attempts), (JobStatus::Running, 3));
    for lost in [first.attempts, second.attempts] {
        assert!(!store
            .finish_job(&job.id, lost, JobStatus::Succeeded, None, at(130))
            .await
            .unwrap());
    }
    assert_eq!(stored().await.status, JobStatus::Running);
    assert!(store
        .job_progress(&job.id, third.attempts, 2, 4, at(190))
        .await
        .unwrap());
    assert!(store
        .finish_job(
            &job.id,
            third.attempts,
            JobStatus::Failed,
            Some("gave up"),
            at(140)
        )
        .await
        .unwrap());
    let ended = stored().await;
    assert_eq!(
        (ended.status, ended.error.as_deref(), ended.progress_done),
        (JobStatus::Failed, Some("gave up"), 2)
    );
    assert!(
        !store
            .job_progress(&job.id, third.attempts, 4, 4, at(200))
            .await
            .unwrap(),
        "an ended job takes no more heartbeats"
    );
    assert!(!store
        .finish_job(&job.id, third.attempts, JobStatus::Succeeded, None, at(200))
        .await
        .unwrap());
    // A refresh's job, claimed, then deleted with its document.
    let refresh = JobRecord::queued(JobKind::Ingest, &job.document_id, &job.user_id, at(300));
    assert_eq!(store.enqueue_job(&refresh).await.unwrap().id, refresh.id);
    let running = store.claim_job(at(301), at(361)).await.unwrap().unwrap();
    assert_eq!(running.id, refresh.id);
    let doc = store
        .document_by_id(&job.document_id)
        .await
        .unwrap()
        .unwrap();
    assert!(store
        .delete_document(&doc.user_id, &doc.agent_id, &doc.id)
        .await
        .unwrap());
    assert!(!store
        .job_progress(&running.id, running.attempts, 1, 1, at(310))
        .await
        .unwrap());
    assert!(!store
        .finish_job(
            &running.id,
            running.attempts,
            JobStatus::Succeeded,
            None,
            at(311)
        )
        .await
        .unwrap());
}

/// [`agentchat::store::JobQueue::enqueue_job`]: while a document's job is queued or running,
/// every enqueue (eight at once among them) answers that job; after it ended, a new job
/// is queued.
pub async fn a_document_has_one_queued_or_running_job(store: Arc<dyn Store>) {
    let now = Utc::now();
    let job = queued_jobs(store.as_ref(), 1, now).await.remove(0);
    let answers = in_parallel(8, |_| {
        let (store, doc, user) = (store.clone(), job.document_id.clone(), job.user_id.clone());
        async move {
            store
                .enqueue_job(&JobRecord::queued(JobKind::Ingest, &doc, &user, now))
                .await
                .unwrap()
        }
    })
    .await;
    assert!(answers.iter().all(|j| j.id == job.id), "{answers:?}");
    let running = store
        .claim_job(now, now + Duration::seconds(60))
        .await
        .unwrap()
        .unwrap();
    let again = JobRecord::queued(JobKind::Ingest, &job.document_id, &job.user_id, now);
    assert_eq!(store.enqueue_job(&again).await.unwrap().id, job.id);
    let failed = JobOutcome::Failed { reason: "no text" };
    assert!(store.complete_job(&running, failed, now).await.unwrap());
    let refresh = JobRecord::queued(JobKind::Ingest, &job.document_id, &job.user_id, now);
    let queued = store.enqueue_job(&refresh).await.unwrap();
    assert_eq!(queued.id, refresh.id, "a new job once the old one ended");
    assert_eq!(
        store
            .job(&job.user_id, &refresh.id)
            .await
            .unwrap()
            .unwrap()
            .status,
        JobStatus::Queued
    );
}

/// The active webhook `id` of `user_id`, subscribed to `agent.created`.
fn webhook(id: &str, user_id: &UserId) -> WebhookRecord {
    WebhookRecord {
        id: id.into(),
        user_id: user_id.clone(),
        url: format!("https://hooks.example.com/{id}"),
        events: vec![EventType::AgentCreated],
        description: String::new(),
        secret_sealed: vec![0; 44],
        active: true,
        disabled_reason: None,
        created_at: Utc::now(),
    }
}

/// [`agentchat::store::WebhookStore::claim_deliveries`]: eight workers claiming at once take
/// each of twelve due deliveries exactly once; before the lease ends nothing is claimed
/// again, after it the unfinished ones are, as second attempts.
pub async fn parallel_delivery_claims_are_distinct(store: Arc<dyn Store>) {
    let now = Utc::now();
    let u1 = user(store.as_ref(), "u1").await.id;
    assert!(store.create_webhook(&webhook("w1", &u1), 10).await.unwrap());
    for i in 0..12 {
        let payload = format!("{{\"n\":{i}}}");
        let queued = store
            .enqueue_event(&u1, EventType::AgentCreated, &payload, now)
            .await
            .unwrap();
        assert_eq!(queued, 1);
    }
    assert_eq!(
        store
            .enqueue_event(&u1, EventType::AgentDeleted, "{}", now)
            .await
            .unwrap(),
        0
    );
    let lease = now + Duration::seconds(60);
    let claims = in_parallel(8, |_| {
        let store = store.clone();
        async move { store.claim_deliveries(now, lease, 3).await.unwrap() }
    })
    .await;
    let claimed: Vec<_> = claims.into_iter().flatten().collect();
    let ids: HashSet<&str> = claimed.iter().map(|c| c.delivery.id.as_str()).collect();
    assert_eq!(claimed.len(), 12, "every due delivery claimed");
    assert_eq!(ids.len(), 12, "each once");
    assert!(claimed
        .iter()
        .all(|c| c.delivery.attempts == 1 && c.url == "https://hooks.example.com/w1"));
    assert!(store
        .claim_deliveries(now + Duration::seconds(30), lease, 100)
        .await
        .unwrap()
        .is_empty());
    let done = &claimed[0].delivery;
    let attempt = AttemptRecord {
        delivery_id: done.id.clone(),
        attempt: 1,
        started_at: now,
        duration_ms: 5,
        response_status: Some(200),
        error: None,
    };
    store
        .record_attempt(&attempt, AfterAttempt::Succeeded, now)
        .await
        .unwrap();
    let after = now + Duration::seconds(61);
    let again = store
        .claim_deliveries(after, after + Duration::seconds(60), 100)
        .await
        .unwrap();
    assert_eq!(
        again.len(),
        11,
        "the unfinished ones, once their lease ended"
    );
    assert!(again
        .iter()
        .all(|c| c.delivery.attempts == 2 && c.delivery.id != done.id));
}

/// [`agentchat::store::WebhookStore::claim_deliveries`]: a claim takes at most `limit`
/// deliveries, the earliest due first, even when the deliveries it takes are due again at
/// once (a lease that has already ended); every due delivery is taken once.
pub async fn a_delivery_claim_takes_at_most_its_limit(store: Arc<dyn Store>) {
    let t0 = Utc::now();
    let u1 = user(store.as_ref(), "u1").await.id;
    assert!(store.create_webhook(&webhook("w1", &u1), 10).await.unwrap());
    for i in 0..5 {
        let at = t0 + Duration::milliseconds(i);
        let queued = store
            .enqueue_event(&u1, EventType::AgentCreated, &format!("{{\"n\":{i}}}"), at)
            .await
            .unwrap();
        assert_eq!(queued, 1);
    }
    let now = t0 + Duration::seconds(1);
    // A lease that ended before the claim: the delivery is due again at once.
    let first = store
        .claim_deliveries(now, now - Duration::seconds(1), 1)
        .await
        .unwrap();
    assert_eq!(first.len(), 1, "one delivery under a limit of one");
    assert_eq!(first[0].delivery.payload, "{\"n\":0}", "the earliest due");
    let lease = now + Duration::seconds(60);
    let second = store.claim_deliveries(now, lease, 2).await.unwrap();
    assert_eq!(second.len(), 2, "two under a limit of two");
    let rest = store.claim_deliveries(now, lease, 100).await.unwrap();
    assert_eq!(rest.len(), 3, "the other three");
    let taken: HashSet<&str> = second
        .iter()
        .chain(&rest)
        .map(|c| c.delivery.payload.as_str())
        .collect();
    assert_eq!(taken.len(), 5, "each delivery once: {taken:?}");
    assert!(store
        .claim_deliveries(now, lease, 100)
        .await
        .unwrap()
        .is_empty());
}

/// [`agentchat::store::WebhookStore::record_attempt`]: an attempt whose lease ran out, and
/// whose delivery another worker claimed again, is stored but does not move the delivery
/// on (the answer is false, and its 410 Gone disables nothing); the current claim's result
/// stands, and a late record after it changes nothing either.
pub async fn a_delivery_is_moved_on_only_under_its_claim(store: Arc<dyn Store>) {
    let t0 = Utc::now();
    let at = |s: i64| t0 + Duration::seconds(s);
    let u1 = user(store.as_ref(), "u1").await.id;
    let w1 = webhook("w1", &u1);
    assert!(store.create_webhook(&w1, 10).await.unwrap());
    let queued = store
        .enqueue_event(&u1, EventType::AgentCreated, "{}", at(0))
        .await
        .unwrap();
    assert_eq!(queued, 1);
    let first = store.claim_deliveries(at(0), at(60), 10).await.unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].delivery.attempts, 1);
    // The first worker's lease runs out; a second worker claims the delivery again.
    let second = store.claim_deliveries(at(61), at(121), 10).await.unwrap();
    assert_eq!(second.len(), 1);
    assert_eq!(
        (&second[0].delivery.id, second[0].delivery.attempts),
        (&first[0].delivery.id, 2)
    );
    let id = &first[0].delivery.id;
    let attempt = |n: u32, status: u16, s: i64| AttemptRecord {
        delivery_id: id.clone(),
        attempt: n,
        started_at: at(s),
        duration_ms: 5,
        response_status: Some(status),
        error: (status != 200).then(|| format!("HTTP {status}")),
    };
    let delivery = || async {
        store
            .list_deliveries(&u1, &w1.id, 10)
            .await
            .unwrap()
            .remove(0)
    };
    // The first worker's answer arrives late: it does not count.
    let late = attempt(1, 410, 1);
    assert!(
        !store
            .record_attempt(&late, AfterAttempt::DisableWebhook, at(62))
            .await
            .unwrap(),
        "the lost claim does not move the delivery on"
    );
    let d = delivery().await;
    assert_eq!(
        (d.status, d.attempts, d.response_status),
        (DeliveryStatus::Sending, 2, None)
    );
    let hook = store.webhook(&u1, &w1.id).await.unwrap().unwrap();
    assert!(hook.active, "a lost claim's 410 disables nothing");
    // The current claim's answer moves it on.
    assert!(store
        .record_attempt(&attempt(2, 200, 61), AfterAttempt::Succeeded, at(63))
        .await
        .unwrap());
    let d = delivery().await;
    assert_eq!(
        (d.status, d.response_status),
        (DeliveryStatus::Succeeded, Some(200))
    );
    // A late record after it changes nothing.
    let retry = AfterAttempt::RetryAt(at(120));
    assert!(!store.record_attempt(&late, retry, at(64)).await.unwrap());
    let d = delivery().await;
    assert_eq!(
        (d.status, d.response_status, d.next_attempt_at),
        (DeliveryStatus::Succeeded, Some(200), None)
    );
    // Both attempts were made, so both are stored.
    let attempts: Vec<(u32, Option<u16>)> = store
        .delivery_attempts(id)
        .await
        .unwrap()
        .into_iter()
        .map(|a| (a.attempt, a.response_status))
        .collect();
    assert_eq!(attempts, [(1, Some(410)), (2, Some(200))]);
}

/// [`agentchat::store::WebhookStore::create_webhook`] and
/// [`agentchat::store::IntegrationStore::create_integration`]: creations at once under a
/// limit leave exactly the limit.
pub async fn parallel_webhook_and_integration_creates_stop_at_the_limit(store: Arc<dyn Store>) {
    let u1 = user(store.as_ref(), "u1").await.id;
    let webhooks = in_parallel(10, |i| {
        let (store, u1) = (store.clone(), u1.clone());
        async move {
            store
                .create_webhook(&webhook(&format!("w{i}"), &u1), 3)
                .await
                .unwrap()
        }
    })
    .await;
    assert_eq!(webhooks.iter().filter(|c| **c).count(), 3, "{webhooks:?}");
    assert_eq!(store.list_webhooks(&u1).await.unwrap().len(), 3);
    let integrations = in_parallel(10, |i| {
        let (store, u1) = (store.clone(), u1.clone());
        async move {
            store
                .create_integration(&integration(&format!("i{i}"), &u1), 2)
                .await
                .unwrap()
        }
    })
    .await;
    assert_eq!(
        integrations.iter().filter(|c| **c).count(),
        2,
        "{integrations:?}"
    );
    assert_eq!(store.list_integrations(&u1).await.unwrap().len(), 2);
}

/// [`agentchat::store::IntegrationStore::first_channel_event`]: of eight deliveries of one
/// inbound event at once, and one later, exactly one is first.
pub async fn an_inbound_event_is_answered_once(store: Arc<dyn Store>) {
    let now = Utc::now();
    let u1 = user(store.as_ref(), "u1").await.id;
    assert!(store
        .create_integration(&integration("i1", &u1), 10)
        .await
        .unwrap());
    let firsts = in_parallel(8, |_| {
        let store = store.clone();
        async move {
            store
                .first_channel_event(&IntegrationId::from("i1"), "update-1", now)
                .await
                .unwrap()
        }
    })
    .await;
    assert_eq!(firsts.iter().filter(|f| **f).count(), 1, "{firsts:?}");
    assert!(!store
        .first_channel_event(&IntegrationId::from("i1"), "update-1", now)
        .await
        .unwrap());
    assert!(store
        .first_channel_event(&IntegrationId::from("i1"), "update-2", now)
        .await
        .unwrap());
}
