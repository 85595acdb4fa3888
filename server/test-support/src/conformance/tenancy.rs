//! Tenant scoping: another user's rows are "not found", whatever the method.

use std::sync::Arc;

use chrono::{NaiveDate, Utc};

use super::{agent, crawled_document, integration, page, user};
use agentchat::domain::EventType;
use agentchat::{
    ids::{AgentId, ApiKeyId, IntegrationId, SessionId, ThreadId, UserId, WebhookId},
    store::{
        integrations::IntegrationRecord,
        jobs::{JobKind, JobRecord},
        webhooks::WebhookRecord,
        AgentPatch, ApiKeyRecord, SessionRecord, Store,
    },
};

/// Every tenant-scoped method, called by user `u2` on the rows of user `u1` (an agent with
/// a thread, a crawled document with chunks and its job, an API key, a webhook with a
/// delivery, an integration and a session), finds nothing and changes nothing; `u1` still
/// finds them all.
pub async fn another_users_rows_are_not_found(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let now = Utc::now();
    let doc = crawled_document(s).await;
    let (a1, t1) = (&doc.agent_id, &ThreadId::from("t1"));
    let (u1, u2) = (&UserId::from("u1"), &UserId::from("u2"));
    let (k1, w1, i1) = (
        &ApiKeyId::from("k1"),
        &WebhookId::from("w1"),
        &IntegrationId::from("i1"),
    );
    user(s, "u2").await;
    agent(s, "a2", u2).await;
    let pages = [page("https://example.com/a", &["alpha"])];
    assert!(s.replace_pages(&doc.id, &pages, now).await.unwrap());
    let chunk_ids = s.chunk_ids_up_to(a1, i64::MAX.into()).await.unwrap();
    let job = s
        .enqueue_job(&JobRecord::queued(JobKind::Crawl, &doc.id, u1, now))
        .await
        .unwrap();
    let key = ApiKeyRecord {
        id: "k1".into(),
        user_id: "u1".into(),
        name: "key".into(),
        prefix: "ak_k1".into(),
        key_hash: "hash-k1".into(),
        scopes: Vec::new(),
        agent_ids: None,
        monthly_token_budget: None,
        expires_at: None,
        created_at: now,
        last_used_at: None,
        revoked_at: None,
    };
    assert!(s.create_api_key(key.clone(), 10).await.unwrap());
    let hook = WebhookRecord {
        id: "w1".into(),
        user_id: "u1".into(),
        url: "https://hooks.example.com/".into(),
        events: vec![EventType::AgentCreated],
        description: String::new(),
        secret_sealed: vec![0; 44],
        active: true,
        disabled_reason: None,
        created_at: now,
    };
    assert!(s.create_webhook(&hook, 10).await.unwrap());
    assert_eq!(
        s.enqueue_event(u1, EventType::AgentCreated, "{}", now)
            .await
            .unwrap(),
        1
    );
    let delivery = s.list_deliveries(u1, w1, 10).await.unwrap().remove(0);
    let integration = IntegrationRecord {
        name: "bot".into(),
        agent_id: Some(a1.clone()),
        ..integration("i1", u1)
    };
    assert!(s.create_integration(&integration, 10).await.unwrap());
    let session = SessionRecord {
        id: "s1".into(),
        user_id: "u1".into(),
        refresh_jti: "j".into(),
        user_agent: None,
        ip: None,
        created_at: now,
        last_seen_at: now,
        revoked_at: None,
    };
    s.create_session(session, 5, now - chrono::Duration::days(1))
        .await
        .unwrap();

    // Agents and chat.
    assert!(s.agent(u2, a1).await.unwrap().is_none());
    assert!(s.list_agents(u2).await.unwrap().iter().all(|a| &a.id != a1));
    let patch = AgentPatch {
        name: Some("taken".into()),
        ..AgentPatch::default()
    };
    assert!(s.update_agent(u2, a1, &patch, now).await.unwrap().is_none());
    assert!(s.thread(u2, a1, t1).await.unwrap().is_none());
    assert!(s.list_threads(u2, a1, 10, None).await.unwrap().is_empty());
    assert!(!s.delete_thread(u2, a1, t1).await.unwrap());
    let epoch = NaiveDate::from_ymd_opt(2000, 1, 1).unwrap();
    assert!(s.usage(u2, epoch).await.unwrap().is_empty());
    // Documents, chunks and jobs.
    assert!(s.document(u2, a1, &doc.id).await.unwrap().is_none());
    assert!(s.list_documents(u2, a1).await.unwrap().is_empty());
    assert!(!s.delete_document(u2, a1, &doc.id).await.unwrap());
    assert!(s.job(u2, &job.id).await.unwrap().is_none());
    assert!(
        s.chunk_hits(&AgentId::from("a2"), &chunk_ids)
            .await
            .unwrap()
            .is_empty(),
        "another agent's chunks are left out"
    );
    // Keys, webhooks, integrations, sessions.
    assert!(s.api_key(u2, k1).await.unwrap().is_none());
    assert!(s.list_api_keys(u2).await.unwrap().is_empty());
    assert!(!s.revoke_api_key(u2, k1, now).await.unwrap());
    let stolen = ApiKeyRecord {
        id: "k2".into(),
        key_hash: "hash-k2".into(),
        ..key
    };
    assert!(!s.rotate_api_key(u2, k1, stolen, now).await.unwrap());
    assert!(s.webhook(u2, w1).await.unwrap().is_none());
    assert!(s.list_webhooks(u2).await.unwrap().is_empty());
    assert!(s.list_deliveries(u2, w1, 10).await.unwrap().is_empty());
    assert_eq!(s.redeliver(u2, w1, &delivery.id, now).await.unwrap(), None);
    assert!(!s.delete_webhook(u2, w1).await.unwrap());
    assert!(s.integration(u2, i1).await.unwrap().is_none());
    assert!(s.list_integrations(u2).await.unwrap().is_empty());
    let hijacked = IntegrationRecord {
        user_id: "u2".into(),
        name: "hijacked".into(),
        ..integration
    };
    assert!(!s.update_integration(&hijacked).await.unwrap());
    assert!(!s.delete_integration(u2, i1).await.unwrap());
    assert!(!s
        .revoke_session(u2, &SessionId::from("s1"), "signed_out", now)
        .await
        .unwrap());
    assert!(!s.delete_agent(u2, a1).await.unwrap());

    // The owner still has everything, unchanged.
    assert_eq!(s.agent(u1, a1).await.unwrap().unwrap().name, "Agent a1");
    assert!(s.thread(u1, a1, t1).await.unwrap().is_some());
    assert!(s.document(u1, a1, &doc.id).await.unwrap().is_some());
    assert_eq!(s.chunk_hits(a1, &chunk_ids).await.unwrap().len(), 1);
    assert!(s.job(u1, &job.id).await.unwrap().is_some());
    assert!(s.api_key(u1, k1).await.unwrap().is_some());
    assert!(s.webhook(u1, w1).await.unwrap().is_some());
    assert_eq!(s.list_deliveries(u1, w1, 10).await.unwrap().len(), 1);
    assert_eq!(s.integration(u1, i1).await.unwrap().unwrap().name, "bot");
    assert_eq!(
        s.live_sessions(u1, now - chrono::Duration::days(1))
            .await
            .unwrap()
            .len(),
        1
    );
}
