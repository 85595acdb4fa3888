//! Cases of agents, threads, messages and daily usage.

use std::sync::Arc;

use chrono::{DateTime, Duration, NaiveDate, Utc};

use super::{agent, agent_record, in_parallel, message, thread_of_new_user, user};
use agentchat::{
    domain::Role,
    ids::{ThreadId, UserId},
    store::{
        chat::ReplyStatus, Cursor, InboxFilter, MessageRecord, Store, ThreadRecord, TurnRecord,
    },
};

/// [`agentchat::store::AgentStore::create_agent`]: ten creations at once under a plan limit
/// of three leave exactly three agents.
pub async fn ten_parallel_agent_creates_at_a_limit_of_three_leave_three(store: Arc<dyn Store>) {
    let u1 = user(store.as_ref(), "u1").await.id;
    let created = in_parallel(10, |i| {
        let (store, u1) = (store.clone(), u1.clone());
        async move {
            store
                .create_agent(&agent_record(&format!("a{i}"), &u1), 3)
                .await
                .unwrap()
        }
    })
    .await;
    assert_eq!(created.iter().filter(|c| **c).count(), 3, "{created:?}");
    assert_eq!(store.list_agents(&u1).await.unwrap().len(), 3);
    assert!(!store
        .create_agent(&agent_record("late", &u1), 3)
        .await
        .unwrap());
}

/// [`agentchat::store::ChatStore::create_thread`]: a thread needs its user's agent; a refused
/// thread leaves no message behind, and an accepted one comes with its first message.
pub async fn a_thread_needs_its_users_agent(store: Arc<dyn Store>) {
    let thread = thread_of_new_user(store.as_ref()).await;
    let now = Utc::now();
    let other_user = ThreadRecord {
        id: "t2".into(),
        user_id: UserId::from("someone-else"),
        ..thread.clone()
    };
    let first = message(&other_user, 0, Role::User, now);
    assert!(!store.create_thread(&other_user, &first).await.unwrap());
    assert!(store
        .thread(&thread.user_id, &thread.agent_id, &ThreadId::from("t2"))
        .await
        .unwrap()
        .is_none());
    assert!(
        store
            .recent_messages(&ThreadId::from("t2"), 10)
            .await
            .unwrap()
            .is_empty(),
        "a refused thread leaves no message behind"
    );
    let kept = store.recent_messages(&thread.id, 10).await.unwrap();
    assert_eq!(kept.len(), 1, "the first message goes in with its thread");
    assert_eq!((kept[0].id.as_str(), kept[0].role), ("first", Role::User));
    let stored = store
        .thread(&thread.user_id, &thread.agent_id, &thread.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.message_count, 1, "the first message is counted");
    assert!(store
        .delete_agent(&thread.user_id, &thread.agent_id)
        .await
        .unwrap());
    let deleted_agent = ThreadRecord {
        id: "t3".into(),
        created_at: now,
        ..thread
    };
    assert!(!store
        .create_thread(&deleted_agent, &message(&deleted_agent, 0, Role::User, now))
        .await
        .unwrap());
}

/// A new thread `id` of `thread`'s user and agent, at `at`.
fn new_thread_like(thread: &ThreadRecord, id: &str, at: DateTime<Utc>) -> ThreadRecord {
    ThreadRecord {
        id: id.into(),
        title: format!("thread {id}"),
        message_count: 0,
        created_at: at,
        updated_at: at,
        ..thread.clone()
    }
}

/// The turn of a user message and a reply (`i`) in `thread`.
fn turn(thread: &ThreadRecord, new_thread: bool, i: usize, at: DateTime<Utc>) -> TurnRecord {
    TurnRecord {
        thread: thread.clone(),
        new_thread,
        messages: vec![
            MessageRecord {
                id: format!("{}-{i}-user", thread.id).into(),
                ..message(thread, i, Role::User, at)
            },
            MessageRecord {
                id: format!("{}-{i}-reply", thread.id).into(),
                // A moment after the user's message, as a reply is.
                ..message(
                    thread,
                    i,
                    Role::Assistant,
                    at + chrono::Duration::milliseconds(1),
                )
            },
        ],
        channel: None,
    }
}

/// Stores one turn (a user message and its reply) in a new thread of a new user's agent,
/// through [`agentchat::store::ChatStore::record_turns`], and checks that it was stored: for
/// the backend-specific tests, which look at how the backend wrote it.
pub async fn store_one_turn(store: &dyn Store) {
    let thread = thread_of_new_user(store).await;
    let fresh = new_thread_like(&thread, "t-one", Utc::now());
    let stored = store
        .record_turns(&[turn(&fresh, true, 1, Utc::now())])
        .await
        .unwrap();
    assert_eq!(stored, [true]);
}

/// [`agentchat::store::ChatStore::record_turns`]: turns of new and existing threads stored in
/// one call are each stored whole (thread, user message, reply, counters and usage); a turn
/// whose agent or thread is gone, or another user's, is reported as not stored and leaves
/// nothing behind, without failing the others.
pub async fn turns_are_stored_whole_in_one_commit(store: Arc<dyn Store>) {
    let thread = thread_of_new_user(store.as_ref()).await;
    let at = Utc::now();
    let fresh = new_thread_like(&thread, "t-new", at);
    let foreign = ThreadRecord {
        user_id: UserId::from("someone-else"),
        ..new_thread_like(&thread, "t-foreign", at)
    };
    let unknown = new_thread_like(&thread, "t-unknown", at);
    let foreign_reply = ThreadRecord {
        user_id: UserId::from("someone-else"),
        ..thread.clone()
    };
    let turns = [
        turn(&thread, false, 1, at),
        turn(&fresh, true, 2, at),
        turn(&foreign, true, 3, at),
        turn(&unknown, false, 4, at),
        turn(&foreign_reply, false, 5, at),
    ];
    let stored = store.record_turns(&turns).await.unwrap();
    assert_eq!(stored, [true, true, false, false, false]);
    let kept = store.recent_messages(&thread.id, 10).await.unwrap();
    let ids: Vec<&str> = kept.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["first", "t1-1-user", "t1-1-reply"]);
    let counted = store
        .thread(&thread.user_id, &thread.agent_id, &thread.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(counted.message_count, 3);
    let created = store
        .thread(&thread.user_id, &thread.agent_id, &fresh.id)
        .await
        .unwrap()
        .expect("the new thread is stored with its turn");
    assert_eq!(
        (created.title.as_str(), created.message_count),
        ("thread t-new", 2)
    );
    let kept = store.recent_messages(&fresh.id, 10).await.unwrap();
    assert_eq!(
        kept.iter().map(|m| m.role).collect::<Vec<_>>(),
        [Role::User, Role::Assistant],
        "the user's message, then the reply"
    );
    for refused in [&foreign, &unknown] {
        assert!(store
            .recent_messages(&refused.id, 10)
            .await
            .unwrap()
            .is_empty());
    }
    assert!(store
        .thread(&foreign.user_id, &foreign.agent_id, &foreign.id)
        .await
        .unwrap()
        .is_none());
    let usage = store.usage(&thread.user_id, at.date_naive()).await.unwrap();
    assert_eq!(
        (
            usage[0].chats,
            usage[0].prompt_tokens,
            usage[0].completion_tokens
        ),
        (2, 20, 10),
        "the two stored replies, and only them"
    );
    // A deleted agent: its new threads are not stored; nothing else is lost.
    assert!(store
        .delete_agent(&thread.user_id, &thread.agent_id)
        .await
        .unwrap());
    let orphan = new_thread_like(&thread, "t-orphan", at);
    assert_eq!(
        store
            .record_turns(&[turn(&orphan, true, 6, at)])
            .await
            .unwrap(),
        [false]
    );
    assert_eq!(store.record_turns(&[]).await.unwrap(), Vec::<bool>::new());
}

/// [`agentchat::store::ChatStore::record_turns`]: a batch that fails part-way (its last turn
/// reuses a message id of its first), of two turns or of six, stores none of its turns, and
/// the store writes on: the same first turn then goes in alone, and is read back.
pub async fn a_failed_turn_batch_leaves_nothing_and_the_store_writes_on(store: Arc<dyn Store>) {
    let thread = thread_of_new_user(store.as_ref()).await;
    let at = Utc::now();
    for size in [2, 6] {
        let threads: Vec<ThreadRecord> = (0..size)
            .map(|i| new_thread_like(&thread, &format!("t-fail{size}-{i}"), at))
            .collect();
        let mut turns: Vec<TurnRecord> = threads.iter().map(|t| turn(t, true, 1, at)).collect();
        let first = turns[0].clone();
        turns[size - 1].messages[0].id = first.messages[0].id.clone();
        assert!(store.record_turns(&turns).await.is_err());
        for t in &threads {
            assert!(
                store
                    .thread(&t.user_id, &t.agent_id, &t.id)
                    .await
                    .unwrap()
                    .is_none(),
                "nothing of the failed batch of {size} is stored"
            );
        }
        assert_eq!(store.record_turns(&[first]).await.unwrap(), [true]);
        let kept = store.recent_messages(&threads[0].id, 10).await.unwrap();
        assert_eq!(kept.len(), 2, "the turn alone is stored, and readable");
    }
    let usage = store.usage(&thread.user_id, at.date_naive()).await.unwrap();
    assert_eq!(usage[0].chats, 2, "only the stored replies are counted");
}

/// [`agentchat::store::ChatStore::record_turns`]: a batch whose future is dropped part-way
/// (a shutdown cancelling the writer) leaves all of its turns or none, and later writes
/// are committed and readable, not caught in a transaction the batch left open.
pub async fn a_cancelled_turn_batch_leaves_all_or_nothing(store: Arc<dyn Store>) {
    let thread = thread_of_new_user(store.as_ref()).await;
    let at = Utc::now();
    let threads: Vec<ThreadRecord> = (0..200)
        .map(|i| new_thread_like(&thread, &format!("c{i}"), at))
        .collect();
    let turns: Vec<TurnRecord> = threads.iter().map(|t| turn(t, true, 0, at)).collect();
    {
        let mut write = Box::pin(store.record_turns(&turns));
        // Some of the batch's calls to the database run, then the future is dropped.
        for _ in 0..3 {
            if let std::task::Poll::Ready(result) = futures::poll!(write.as_mut()) {
                result.unwrap();
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    }
    let mut stored = 0;
    for t in &threads {
        if store
            .thread(&t.user_id, &t.agent_id, &t.id)
            .await
            .unwrap()
            .is_some()
        {
            stored += 1;
        }
    }
    assert!(
        stored == 0 || stored == threads.len(),
        "{stored} of {} turns stored",
        threads.len()
    );
    let after = new_thread_like(&thread, "c-after", at);
    assert_eq!(
        store
            .record_turns(&[turn(&after, true, 1, at)])
            .await
            .unwrap(),
        [true]
    );
    assert_eq!(
        store.recent_messages(&after.id, 10).await.unwrap().len(),
        2,
        "a later turn is committed and readable"
    );
}

/// [`agentchat::store::Store`]: writes dropped while they begin their transaction (clients
/// that hung up) leave no transaction open: the writes that follow, one statement each,
/// are committed and seen through every connection, and wait on no lock of theirs.
pub async fn writes_dropped_while_they_begin_leave_no_transaction_open(store: Arc<dyn Store>) {
    let thread = thread_of_new_user(store.as_ref()).await;
    for i in 0..40 {
        let record = agent_record(&format!("dropped{i}"), &thread.user_id);
        let mut create = Box::pin(store.create_agent(&record, 100));
        // The first poll takes a connection and sends BEGIN; a later one may read its
        // answer. Then the write is dropped.
        for _ in 0..=(i % 4) {
            if futures::poll!(create.as_mut()).is_ready() {
                break;
            }
            tokio::task::yield_now().await;
        }
    }
    let at = Utc::now();
    let later = async {
        for i in 1..=40 {
            let m = MessageRecord {
                id: format!("after{i}").into(),
                ..message(&thread, i, Role::User, at)
            };
            store.append_message(&m).await.unwrap();
        }
        // Read as often as there are connections to read through.
        for _ in 0..40 {
            let seen = store
                .thread(&thread.user_id, &thread.agent_id, &thread.id)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(seen.message_count, 41, "every later message is committed");
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), later)
        .await
        .expect("a later write waited on a lock of a transaction left open");
}

/// [`agentchat::store::ChatStore::record_turns`]: 20 batches of 10 new conversations stored at
/// once (and a second turn in each) are all written, every message counted in its thread
/// and every reply in the day's usage.
pub async fn parallel_turn_batches_are_all_counted(store: Arc<dyn Store>) {
    let thread = thread_of_new_user(store.as_ref()).await;
    let at = Utc::now();
    in_parallel(20, |b| {
        let (store, thread) = (store.clone(), thread.clone());
        async move {
            let threads: Vec<ThreadRecord> = (0..10)
                .map(|i| new_thread_like(&thread, &format!("b{b}-{i}"), at))
                .collect();
            let first: Vec<TurnRecord> = threads.iter().map(|t| turn(t, true, 0, at)).collect();
            assert!(store.record_turns(&first).await.unwrap().iter().all(|s| *s));
            let second: Vec<TurnRecord> = threads.iter().map(|t| turn(t, false, 1, at)).collect();
            assert!(store
                .record_turns(&second)
                .await
                .unwrap()
                .iter()
                .all(|s| *s));
        }
    })
    .await;
    for b in [0, 19] {
        let t = store
            .thread(
                &thread.user_id,
                &thread.agent_id,
                &ThreadId::from(format!("b{b}-9")),
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!(t.message_count, 4);
    }
    let usage = store.usage(&thread.user_id, at.date_naive()).await.unwrap();
    assert_eq!(
        (
            usage[0].chats,
            usage[0].prompt_tokens,
            usage[0].completion_tokens
        ),
        (400, 4_000, 2_000)
    );
}

/// [`agentchat::store::ChatStore::record_turns`]: batches of one, two and six new
/// conversations written by nine writers at once while their agent is deleted never fail:
/// each turn is stored before the deletion or refused after it, and none of them outlives
/// the agent (no thread, no message).
pub async fn turn_batches_racing_their_agents_deletion_leave_nothing(store: Arc<dyn Store>) {
    let thread = thread_of_new_user(store.as_ref()).await;
    let at = Utc::now();
    let written = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let deleted = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let deleter = {
        let (store, thread, written, deleted) = (
            store.clone(),
            thread.clone(),
            written.clone(),
            deleted.clone(),
        );
        tokio::spawn(async move {
            while written.load(std::sync::atomic::Ordering::SeqCst) < 9 {
                tokio::task::yield_now().await;
            }
            assert!(store
                .delete_agent(&thread.user_id, &thread.agent_id)
                .await
                .unwrap());
            deleted.store(true, std::sync::atomic::Ordering::SeqCst);
        })
    };
    let writes = in_parallel(9, |w| {
        let (store, thread, written, deleted) = (
            store.clone(),
            thread.clone(),
            written.clone(),
            deleted.clone(),
        );
        async move {
            let size = [1, 2, 6][w % 3];
            let mut ids = Vec::new();
            let (mut stored, mut refused_after) = (0, 0);
            for b in 0..500 {
                let after = deleted.load(std::sync::atomic::Ordering::SeqCst);
                let threads: Vec<ThreadRecord> = (0..size)
                    .map(|i| new_thread_like(&thread, &format!("race-{w}-{b}-{i}"), at))
                    .collect();
                let turns: Vec<TurnRecord> = threads.iter().map(|t| turn(t, true, 0, at)).collect();
                let results = store.record_turns(&turns).await.unwrap();
                ids.extend(threads.into_iter().map(|t| t.id));
                written.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                stored += results.iter().filter(|s| **s).count();
                if after {
                    assert!(
                        results.iter().all(|s| !*s),
                        "a turn is refused once its agent is deleted"
                    );
                    refused_after += 1;
                    if refused_after == 3 {
                        break;
                    }
                }
            }
            assert_eq!(refused_after, 3, "the deletion was seen");
            (ids, stored)
        }
    })
    .await;
    deleter.await.unwrap();
    let stored: usize = writes.iter().map(|(_, stored)| stored).sum();
    assert!(stored >= 9, "turns went in before the deletion: {stored}");
    for id in writes.into_iter().flat_map(|(ids, _)| ids) {
        assert!(
            store
                .thread(&thread.user_id, &thread.agent_id, &id)
                .await
                .unwrap()
                .is_none(),
            "no thread outlives its agent"
        );
        assert!(
            store.recent_messages(&id, 10).await.unwrap().is_empty(),
            "no message outlives its agent"
        );
    }
}

/// [`agentchat::store::ChatStore::record_turns`]: one batch holding a new conversation's
/// first two turns (the second on the next UTC day), a turn of an older thread and a second
/// new conversation counts exactly as the turns would one by one: each thread's messages and
/// latest activity, each day's replies and tokens, and each API key's month.
pub async fn a_batch_counts_as_its_turns_would_one_by_one(store: Arc<dyn Store>) {
    let thread = thread_of_new_user(store.as_ref()).await;
    for id in ["k1", "k2"] {
        let key = super::accounts::api_key(id, &thread.user_id);
        assert!(store.create_api_key(key, 10).await.unwrap());
    }
    let day = |d: u32| NaiveDate::from_ymd_opt(2031, 3, d).unwrap();
    let late_first = day(1).and_hms_opt(23, 59, 59).unwrap().and_utc();
    let early_second = day(2).and_hms_opt(0, 0, 1).unwrap().and_utc();
    let with_key = |mut turn: TurnRecord, key: &str| {
        turn.messages[1].api_key_id = Some(key.into());
        turn
    };
    let fresh = new_thread_like(&thread, "t-batch", late_first);
    let other = new_thread_like(&thread, "t-batch-other", early_second);
    let turns = [
        with_key(turn(&fresh, true, 1, late_first), "k1"),
        with_key(turn(&fresh, false, 2, early_second), "k1"),
        with_key(turn(&thread, false, 3, early_second), "k2"),
        turn(&other, true, 4, early_second),
    ];
    assert_eq!(
        store.record_turns(&turns).await.unwrap(),
        [true, true, true, true]
    );
    let counted = |id: &ThreadId| {
        let (store, thread) = (store.clone(), thread.clone());
        let id = id.clone();
        async move {
            let t = store
                .thread(&thread.user_id, &thread.agent_id, &id)
                .await
                .unwrap()
                .unwrap();
            (t.message_count, t.updated_at.timestamp_millis())
        }
    };
    // Each reply is stored a millisecond after its user's message.
    let reply_at = |at: DateTime<Utc>| (at + Duration::milliseconds(1)).timestamp_millis();
    assert_eq!(counted(&fresh.id).await, (4, reply_at(early_second)));
    assert_eq!(counted(&other.id).await, (2, reply_at(early_second)));
    assert_eq!(
        counted(&thread.id).await,
        (
            3,
            reply_at(early_second).max(thread.updated_at.timestamp_millis())
        )
    );
    let usage: Vec<_> = store
        .usage(&thread.user_id, day(1))
        .await
        .unwrap()
        .into_iter()
        .map(|u| (u.day, u.chats, u.prompt_tokens, u.completion_tokens))
        .collect();
    assert_eq!(usage, [(day(1), 1, 10, 5), (day(2), 3, 30, 15)]);
    assert_eq!(store.key_usage(&"k1".into(), "2031-03").await.unwrap(), 30);
    assert_eq!(store.key_usage(&"k2".into(), "2031-03").await.unwrap(), 15);
}

/// [`agentchat::store::ChatStore::append_message`]: 200 messages appended at once are all
/// written, every one counted into its thread and every assistant message into the day's
/// usage.
pub async fn concurrent_messages_are_all_written_and_counted(store: Arc<dyn Store>) {
    let thread = thread_of_new_user(store.as_ref()).await;
    let at = Utc::now();
    in_parallel(100, |i| {
        let (store, thread) = (store.clone(), thread.clone());
        async move {
            store
                .append_message(&message(&thread, i, Role::User, at))
                .await
                .unwrap();
            store
                .append_message(&message(&thread, i, Role::Assistant, at))
                .await
                .unwrap();
        }
    })
    .await;
    let stored = store
        .thread(&thread.user_id, &thread.agent_id, &thread.id)
        .await
        .unwrap()
        .unwrap();
    // 200 and the thread's first message.
    assert_eq!(stored.message_count, 201);
    assert_eq!(stored.updated_at.timestamp_millis(), at.timestamp_millis());
    let usage = store.usage(&thread.user_id, at.date_naive()).await.unwrap();
    assert_eq!(usage.len(), 1);
    assert_eq!(usage[0].day, at.date_naive());
    assert_eq!(
        (
            usage[0].chats,
            usage[0].prompt_tokens,
            usage[0].completion_tokens
        ),
        (100, 1_000, 500)
    );
}

/// [`agentchat::store::ChatStore::append_message`]: the activity time only moves forward;
/// usage goes to the UTC day of each assistant message, counts a reply without token
/// counts as 0 tokens, and outlives the thread.
pub async fn thread_counters_and_daily_usage_follow_appended_messages(store: Arc<dyn Store>) {
    let thread = thread_of_new_user(store.as_ref()).await;
    let day = |d: u32| NaiveDate::from_ymd_opt(2031, 3, d).unwrap();
    let at = |d: u32, h: u32, m: u32| -> DateTime<Utc> {
        day(d).and_hms_opt(h, m, 59).unwrap().and_utc()
    };
    let late_first = at(1, 23, 59);
    let early_second = at(2, 0, 0);
    store
        .append_message(&message(&thread, 1, Role::Assistant, late_first))
        .await
        .unwrap();
    store
        .append_message(&message(&thread, 2, Role::Assistant, early_second))
        .await
        .unwrap();
    let untimed = MessageRecord {
        prompt_tokens: None,
        completion_tokens: None,
        status: ReplyStatus::Failed,
        ..message(&thread, 3, Role::Assistant, early_second)
    };
    store.append_message(&untimed).await.unwrap();
    store
        .append_message(&message(&thread, 4, Role::User, early_second))
        .await
        .unwrap();
    // An older message (a clock step back) leaves the activity time where it was.
    store
        .append_message(&message(
            &thread,
            5,
            Role::User,
            late_first - Duration::days(1),
        ))
        .await
        .unwrap();
    let stored = store
        .thread(&thread.user_id, &thread.agent_id, &thread.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.message_count, 6);
    assert_eq!(
        stored.updated_at.timestamp_millis(),
        early_second
            .timestamp_millis()
            .max(thread.updated_at.timestamp_millis())
    );
    let usage = |from| {
        let store = store.clone();
        let user = thread.user_id.clone();
        async move {
            store
                .usage(&user, from)
                .await
                .unwrap()
                .into_iter()
                .map(|u| (u.day, u.chats, u.prompt_tokens, u.completion_tokens))
                .collect::<Vec<_>>()
        }
    };
    let expected = vec![(day(1), 1, 10, 5), (day(2), 2, 10, 5)];
    assert_eq!(usage(day(1)).await, expected, "oldest first, per UTC day");
    assert_eq!(usage(day(2)).await, expected[1..], "from the given day on");
    assert!(store
        .delete_thread(&thread.user_id, &thread.agent_id, &thread.id)
        .await
        .unwrap());
    assert_eq!(usage(day(1)).await, expected, "usage outlives the thread");
    let listed = store
        .list_threads(&thread.user_id, &thread.agent_id, 10, None)
        .await
        .unwrap();
    assert!(listed.is_empty());
}

/// [`agentchat::store::ChatStore::key_usage`] and `claim_usage_alert`: a reply sent with an
/// API key counts its tokens in the key's month (the account's too), a user message and
/// another key's reply do not; of twelve claims of one alert at once exactly one wins, and
/// another threshold, month or quota is another alert.
pub async fn key_usage_counts_and_an_alert_is_claimed_once(store: Arc<dyn Store>) {
    let thread = thread_of_new_user(store.as_ref()).await;
    let key = |id: &str| agentchat::store::ApiKeyRecord {
        id: id.into(),
        user_id: thread.user_id.clone(),
        name: id.into(),
        prefix: format!("ak_{id}"),
        key_hash: format!("hash-{id}"),
        scopes: vec!["chat:write".into()],
        agent_ids: Some(vec![thread.agent_id.clone()]),
        monthly_token_budget: Some(1_000),
        expires_at: None,
        created_at: Utc::now(),
        last_used_at: None,
        revoked_at: None,
    };
    assert!(store.create_api_key(key("k1"), 10).await.unwrap());
    assert!(store.create_api_key(key("k2"), 10).await.unwrap());
    let at = NaiveDate::from_ymd_opt(2031, 3, 31)
        .unwrap()
        .and_hms_opt(23, 59, 0)
        .unwrap()
        .and_utc();
    let with_key = |i: usize, role: Role, key: &str| MessageRecord {
        api_key_id: Some(key.into()),
        ..message(&thread, i, role, at)
    };
    for m in [
        with_key(1, Role::User, "k1"),
        with_key(2, Role::Assistant, "k1"),
        with_key(3, Role::Assistant, "k1"),
        with_key(4, Role::Assistant, "k2"),
    ] {
        store.append_message(&m).await.unwrap();
    }
    // Each reply: 10 prompt and 5 completion tokens.
    assert_eq!(store.key_usage(&"k1".into(), "2031-03").await.unwrap(), 30);
    assert_eq!(store.key_usage(&"k2".into(), "2031-03").await.unwrap(), 15);
    assert_eq!(store.key_usage(&"k1".into(), "2031-04").await.unwrap(), 0);
    let mut usages = store.key_usages(&thread.user_id, "2031-03").await.unwrap();
    usages.sort();
    assert_eq!(usages, [("k1".into(), 30), ("k2".into(), 15)]);
    assert!(store
        .key_usages(&"stranger".into(), "2031-03")
        .await
        .unwrap()
        .is_empty());
    let stored = store.list_messages(&thread.id, 10, None).await.unwrap();
    assert!(stored
        .iter()
        .any(|m| m.api_key_id.as_ref().map(|k| k.as_str()) == Some("k2")));

    let claims = in_parallel(12, |_| {
        let (store, user) = (store.clone(), thread.user_id.clone());
        async move {
            store
                .claim_usage_alert(&user, "plan", "2031-03", 80, Utc::now())
                .await
                .unwrap()
        }
    })
    .await;
    let won = claims.iter().filter(|w| **w).count();
    assert_eq!(won, 1, "one claim of an alert wins");
    for (subject, month, threshold) in [
        ("plan", "2031-03", 100),
        ("plan", "2031-04", 80),
        ("k1", "2031-03", 80),
    ] {
        assert!(store
            .claim_usage_alert(&thread.user_id, subject, month, threshold, Utc::now())
            .await
            .unwrap());
    }
}

/// Searched words, and whether thread `s{i}` holds them.
type SearchCase = (&'static [&'static str], fn(usize) -> bool);

/// [`agentchat::store::ChatStore::inbox`] with words: whether a word is in a handful of
/// messages, in thousands, or in more than ten thousand, of this account or mostly of
/// another (each backend may plan each case its own way), a search lists exactly the
/// threads holding every word, newest activity first, and a cursor goes on where the page
/// ended.
pub async fn a_search_lists_the_same_threads_for_rare_and_common_words(store: Arc<dyn Store>) {
    const THREADS: usize = 6_000;
    let thread = thread_of_new_user(store.as_ref()).await;
    let start = Utc::now() - Duration::days(1);
    // Thread i holds "everywhere" in both messages unless 7 divides i (10,284 messages),
    // "middling" in its question when i is even (3,000), "seldom" when 600 divides i (10),
    // "elsewhere" when 1000 divides i (12; another account holds 10,002 more).
    let words = |i: usize| {
        let mut text = String::from("Hello there");
        if !i.is_multiple_of(7) {
            text.push_str(" everywhere");
        }
        if i.is_multiple_of(1000) {
            text.push_str(" Elsewhere,");
        }
        (text.clone(), {
            if i.is_multiple_of(2) {
                text.push_str(" middling");
            }
            if i.is_multiple_of(600) {
                text.push_str(" seldom");
            }
            text
        })
    };
    let threads: Vec<ThreadRecord> = (0..THREADS)
        .map(|i| {
            new_thread_like(
                &thread,
                &format!("s{i:05}"),
                start + Duration::seconds(i as i64),
            )
        })
        .collect();
    for chunk in threads.chunks(500) {
        let turns: Vec<TurnRecord> = chunk
            .iter()
            .map(|t| {
                let i: usize = t.id.as_str()[1..].parse().unwrap();
                let (reply, question) = words(i);
                let mut turn = turn(t, true, i, t.created_at);
                turn.messages[0].content = question;
                turn.messages[1].content = reply;
                turn
            })
            .collect();
        let stored = store.record_turns(&turns).await.unwrap();
        assert!(stored.iter().all(|s| *s));
    }
    let stranger = user(store.as_ref(), "u2").await;
    let theirs = agent(store.as_ref(), "a2", &stranger.id).await;
    let their_thread = ThreadRecord {
        id: "x".into(),
        agent_id: theirs.id,
        user_id: stranger.id,
        ..thread.clone()
    };
    for chunk in (0..5_001).collect::<Vec<usize>>().chunks(500) {
        let turns: Vec<TurnRecord> = chunk
            .iter()
            .map(|i| {
                let t = new_thread_like(&their_thread, &format!("x{i:05}"), start);
                let mut turn = turn(&t, true, *i, start);
                for m in &mut turn.messages {
                    m.content = "elsewhere and everywhere".into();
                }
                turn
            })
            .collect();
        assert!(store.record_turns(&turns).await.unwrap().iter().all(|s| *s));
    }
    let cases: [SearchCase; 5] = [
        (&["seldom"], |i| i.is_multiple_of(600)),
        (&["middling"], |i| i.is_multiple_of(2)),
        (&["everywhere"], |i| !i.is_multiple_of(7)),
        (&["everyw", "middl"], |i| {
            !i.is_multiple_of(7) && i.is_multiple_of(2)
        }),
        (&["elsewhere"], |i| i.is_multiple_of(1000)),
    ];
    for (search, holds) in cases {
        let expected: Vec<String> = (0..THREADS)
            .rev()
            .filter(|i| holds(*i))
            .map(|i| format!("s{i:05}"))
            .collect();
        let filter = InboxFilter {
            words: search.iter().map(|w| w.to_string()).collect(),
            ..InboxFilter::default()
        };
        let first = store
            .inbox(&thread.user_id, &filter, 51, None)
            .await
            .unwrap();
        let ids: Vec<&str> = first.iter().map(|t| t.thread.id.as_str()).collect();
        let want = &expected[..expected.len().min(51)];
        assert_eq!(ids, want, "{search:?}");
        let last = &first[first.len().min(40) - 1].thread;
        let cursor = Cursor {
            at: last.updated_at.timestamp_millis(),
            id: last.id.as_str().to_string(),
        };
        let next = store
            .inbox(&thread.user_id, &filter, 51, Some(&cursor))
            .await
            .unwrap();
        let ids: Vec<&str> = next.iter().map(|t| t.thread.id.as_str()).collect();
        let from = first.len().min(40);
        let want = &expected[from..expected.len().min(from + 51)];
        assert_eq!(ids, want, "{search:?} after a cursor");
    }
}
