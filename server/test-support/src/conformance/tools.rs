//! Cases of [`agentchat::store::tools::ToolStore`]: the per-agent tool limit and unique names,
//! and approvals decided once and continued once.

use std::sync::Arc;

use chrono::{Duration, Utc};

use super::{in_parallel, thread_of_new_user};
use agentchat::{
    domain::ToolType,
    ids::{MessageId, ToolCallId, ToolId},
    store::{
        tools::{ApprovalRecord, ToolRecord},
        Conflict, Store, StoreError, ThreadRecord,
    },
};

/// The tool `name` of `thread`'s agent, not stored yet.
fn tool_record(thread: &ThreadRecord, name: &str) -> ToolRecord {
    let now = Utc::now();
    ToolRecord {
        id: ToolId::new(),
        agent_id: thread.agent_id.clone(),
        user_id: thread.user_id.clone(),
        tool_type: ToolType::WebFetch,
        name: name.into(),
        description: String::new(),
        enabled: true,
        requires_approval: false,
        config: "{}".into(),
        secrets_sealed: None,
        key_id: None,
        created_at: now,
        updated_at: now,
    }
}

/// [`agentchat::store::tools::ToolStore::create_tool`]: ten parallel creations at a limit of
/// three leave three tools; a taken name is [`Conflict::ToolName`], on creation and on
/// update; another account's agent gets none.
pub async fn parallel_tool_creates_stop_at_the_limit_and_names_stay_unique(store: Arc<dyn Store>) {
    let thread = thread_of_new_user(store.as_ref()).await;
    let created = in_parallel(10, |i| {
        let (store, record) = (store.clone(), tool_record(&thread, &format!("t{i}")));
        async move { store.create_tool(&record, 3).await.unwrap() }
    })
    .await;
    assert_eq!(created.iter().filter(|c| **c).count(), 3, "{created:?}");
    let tools = store
        .list_tools(&thread.user_id, &thread.agent_id)
        .await
        .unwrap();
    assert_eq!(tools.len(), 3);
    let taken = tool_record(&thread, &tools[0].name);
    assert!(matches!(
        store.create_tool(&taken, 10).await,
        Err(StoreError::Conflict(Conflict::ToolName))
    ));
    let renamed = ToolRecord {
        name: tools[1].name.clone(),
        ..tools[0].clone()
    };
    assert!(matches!(
        store.update_tool(&renamed).await,
        Err(StoreError::Conflict(Conflict::ToolName))
    ));
    let stranger = ToolRecord {
        user_id: "someone-else".into(),
        ..tool_record(&thread, "mine")
    };
    assert!(!store.create_tool(&stranger, 10).await.unwrap());
    assert!(!store
        .delete_tool(&stranger.user_id, &thread.agent_id, &tools[0].id)
        .await
        .unwrap());
}

/// Pending approvals `c0..cN` of the reply `m1` in `thread`.
fn approvals(thread: &ThreadRecord, n: usize) -> Vec<ApprovalRecord> {
    let now = Utc::now();
    (0..n)
        .map(|i| ApprovalRecord {
            thread_id: thread.id.clone(),
            tool_call_id: ToolCallId::from(format!("c{i}")),
            message_id: MessageId::from("m1"),
            user_id: thread.user_id.clone(),
            agent_id: thread.agent_id.clone(),
            name: "act".into(),
            arguments: "{}".into(),
            status: "pending".into(),
            result: None,
            created_at: now + Duration::milliseconds(i as i64),
            expires_at: now + Duration::hours(24),
        })
        .collect()
}

/// [`agentchat::store::tools::ToolStore::decide_approval`]: of ten parallel decisions of one
/// call exactly one wins; an expired call cannot be decided.
pub async fn one_decision_of_an_approval_wins(store: Arc<dyn Store>) {
    let thread = thread_of_new_user(store.as_ref()).await;
    let mut records = approvals(&thread, 2);
    records[1].expires_at = Utc::now() - Duration::seconds(1);
    store.create_approvals(&records).await.unwrap();
    let won = in_parallel(10, |i| {
        let (store, record) = (store.clone(), records[0].clone());
        async move {
            store
                .decide_approval(&record, i % 2 == 0, Utc::now())
                .await
                .unwrap()
        }
    })
    .await;
    assert_eq!(won.iter().filter(|w| **w).count(), 1, "{won:?}");
    let decided = store
        .approval(&thread.user_id, &thread.id, &records[0].tool_call_id)
        .await
        .unwrap()
        .unwrap();
    assert_ne!(decided.status, "pending");
    assert!(!store
        .decide_approval(&records[1], true, Utc::now())
        .await
        .unwrap());
    assert!(store
        .approval(&"someone-else".into(), &thread.id, &records[0].tool_call_id)
        .await
        .unwrap()
        .is_none());
}

/// [`agentchat::store::tools::ToolStore::claim_continuation`]: nothing while a call waits or
/// lacks its result; once all are settled, one of ten parallel claims gets every call,
/// oldest first, and later claims get nothing.
pub async fn a_turn_stopped_for_approvals_continues_once(store: Arc<dyn Store>) {
    let thread = thread_of_new_user(store.as_ref()).await;
    let records = approvals(&thread, 2);
    store.create_approvals(&records).await.unwrap();
    let message = MessageId::from("m1");
    assert!(store
        .decide_approval(&records[0], true, Utc::now())
        .await
        .unwrap());
    store
        .set_approval_result(&thread.id, &records[0].tool_call_id, "{\"n\":0}")
        .await
        .unwrap();
    assert!(store.claim_continuation(&message).await.unwrap().is_empty());
    assert_eq!(store.pending_approvals(&message).await.unwrap().len(), 1);
    assert!(store
        .decide_approval(&records[1], false, Utc::now())
        .await
        .unwrap());
    assert!(
        store.claim_continuation(&message).await.unwrap().is_empty(),
        "a decided call without its result holds the turn"
    );
    store
        .set_approval_result(&thread.id, &records[1].tool_call_id, "{\"n\":1}")
        .await
        .unwrap();
    let claims = in_parallel(10, |_| {
        let (store, message) = (store.clone(), message.clone());
        async move { store.claim_continuation(&message).await.unwrap() }
    })
    .await;
    let winners: Vec<_> = claims.iter().filter(|c| !c.is_empty()).collect();
    assert_eq!(winners.len(), 1, "{claims:?}");
    let ids: Vec<&str> = winners[0].iter().map(|r| r.tool_call_id.as_str()).collect();
    assert_eq!(ids, ["c0", "c1"]);
    assert!(store.claim_continuation(&message).await.unwrap().is_empty());
}
