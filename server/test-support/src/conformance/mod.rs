//! The store conformance suite: the rules every backend must keep (each stated on the
//! trait method it concerns), proven against any [`Store`]. Each case is a `pub async fn`
//! taking a freshly migrated, empty store and panicking when the rule is broken;
//! concurrency cases run their calls as parallel tasks, so the test runtime must be
//! multi-threaded. Nothing here knows the backend: `server/tests/store.rs` runs every case
//! on the backend `AGENTCHAT_TEST_DATABASE_URL` names (a SQLite file in a temporary folder
//! when it is unset), one fresh database per case.

mod accounts;
mod chat;
mod documents;
mod queues;
mod refresh;
mod tenancy;
mod tools;

use std::{future::Future, sync::Arc};

use chrono::{DateTime, Utc};

pub use accounts::*;
pub use chat::*;
pub use documents::*;
pub use queues::*;
pub use refresh::*;
pub use tenancy::*;
pub use tools::*;

use agentchat::store::{
    agents::AgentStatus,
    chat::ReplyStatus,
    documents::{DocumentRecord, NewChunk, PageRecord},
    jobs::{JobKind, JobRecord},
    AgentRecord, MessageRecord, NewUser, Store, ThreadRecord, UserRecord,
};
use agentchat::{
    domain::{Channel, Email, Role},
    ids::{AgentId, DocumentId, UserId},
};

/// Calls `$callback!` with the name of every conformance case, so that a test file gets
/// one test per case and a new case cannot be forgotten there.
#[doc(hidden)]
#[macro_export]
macro_rules! for_each_store_conformance_case {
    ($callback:ident) => {
        $callback! {
            an_email_is_taken_once,
            an_email_token_works_once,
            of_an_accounts_outstanding_links_only_one_is_ever_consumed,
            ten_parallel_sign_ins_leave_at_most_five_live_sessions,
            the_oldest_sessions_beyond_the_cap_are_ended,
            refresh_rotation_is_compare_and_set,
            parallel_api_key_creates_stop_at_the_cap,
            two_unlinks_at_once_leave_a_way_to_sign_in,
            another_users_rows_are_not_found,
            ten_parallel_agent_creates_at_a_limit_of_three_leave_three,
            a_thread_needs_its_users_agent,
            concurrent_messages_are_all_written_and_counted,
            thread_counters_and_daily_usage_follow_appended_messages,
            turns_are_stored_whole_in_one_commit,
            a_failed_turn_batch_leaves_nothing_and_the_store_writes_on,
            a_cancelled_turn_batch_leaves_all_or_nothing,
            writes_dropped_while_they_begin_leave_no_transaction_open,
            parallel_turn_batches_are_all_counted,
            turn_batches_racing_their_agents_deletion_leave_nothing,
            a_batch_counts_as_its_turns_would_one_by_one,
            a_search_lists_the_same_threads_for_rare_and_common_words,
            crawled_pages_written_together_replace_each_pages_chunks,
            crawled_pages_of_a_deleted_document_are_not_written,
            documents_deleted_while_written_leave_nothing_behind,
            chunk_ids_only_grow,
            the_chunk_generation_changes_with_every_chunk_write_and_delete,
            searches_see_chunks_written_by_another_process_at_once,
            an_interrupted_index_build_is_started_over,
            searches_are_scoped_to_the_agent,
            two_interleaved_chunk_writers_leave_nothing_out_of_the_index,
            sixteen_claimers_over_eight_jobs_take_eight_distinct_jobs,
            a_claimed_job_is_claimed_again_only_after_its_lease,
            a_lost_claim_can_neither_renew_nor_end_its_job,
            a_document_has_one_queued_or_running_job,
            queued_jobs_are_counted_by_kind,
            a_due_refresh_is_claimed_by_one_of_parallel_schedulers,
            a_jobs_end_moves_the_schedule_from_its_start,
            a_pages_validators_and_links_are_kept_without_touching_its_chunks,
            parallel_delivery_claims_are_distinct,
            a_delivery_claim_takes_at_most_its_limit,
            a_delivery_is_moved_on_only_under_its_claim,
            parallel_webhook_and_integration_creates_stop_at_the_limit,
            an_inbound_event_is_answered_once,
            parallel_tool_creates_stop_at_the_limit_and_names_stay_unique,
            one_decision_of_an_approval_wins,
            a_turn_stopped_for_approvals_continues_once,
            key_usage_counts_and_an_alert_is_claimed_once,
        }
    };
}

/// Runs every case in turn, each on a fresh store from `make` (for a backend that wants
/// the whole suite as one test; `server/tests/store.rs` runs one test per case instead).
pub async fn run_all<F, Fut>(make: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Arc<dyn Store>>,
{
    macro_rules! run {
        ($($case:ident),* $(,)?) => {
            $( $case(make().await).await; )*
        };
    }
    for_each_store_conformance_case!(run);
}

/// Creates the verified user `id` with the email `{id}@example.com`.
async fn user(store: &dyn Store, id: &str) -> UserRecord {
    store
        .create_user(new_user(id, &format!("{id}@example.com")))
        .await
        .expect("creating a user")
}

/// What creating the verified user `id` with `email` stores.
fn new_user(id: &str, email: &str) -> NewUser {
    NewUser {
        id: id.into(),
        email: Email::parse(email).expect("a valid email"),
        name: format!("User {id}"),
        password_hash: None,
        company: None,
        country: None,
        phone: None,
        email_verified: true,
        now: Utc::now(),
    }
}

/// The agent `id` of `user_id`, not stored yet.
fn agent_record(id: &str, user_id: &UserId) -> AgentRecord {
    let now = Utc::now();
    AgentRecord {
        id: AgentId::from(id),
        user_id: user_id.clone(),
        name: format!("Agent {id}"),
        description: String::new(),
        system_prompt: String::new(),
        model: String::new(),
        status: AgentStatus::Active,
        created_at: now,
        updated_at: now,
        has_knowledge: false,
        has_tools: false,
    }
}

/// Creates the agent `id` of `user_id`.
async fn agent(store: &dyn Store, id: &str, user_id: &UserId) -> AgentRecord {
    let agent = agent_record(id, user_id);
    assert!(store
        .create_agent(&agent, 100)
        .await
        .expect("creating an agent"));
    agent
}

/// Creates the user `u1` with the agent `a1` and its thread `t1`, whose first message is
/// `first` (a user message).
async fn thread_of_new_user(store: &dyn Store) -> ThreadRecord {
    let now = Utc::now();
    let user = user(store, "u1").await;
    let agent = agent(store, "a1", &user.id).await;
    let thread = ThreadRecord {
        id: "t1".into(),
        agent_id: agent.id,
        user_id: user.id,
        title: "Hello".into(),
        message_count: 0,
        channel: Channel::Api,
        feedback_up: 0,
        feedback_down: 0,
        created_at: now,
        updated_at: now,
    };
    let first = MessageRecord {
        id: "first".into(),
        ..message(&thread, 0, Role::User, now)
    };
    assert!(store.create_thread(&thread, &first).await.unwrap());
    thread
}

/// Message `i` of `thread` with `role` at `at`; an assistant message used 10 prompt and 5
/// completion tokens.
fn message(thread: &ThreadRecord, i: usize, role: Role, at: DateTime<Utc>) -> MessageRecord {
    MessageRecord {
        id: format!("m{i}-{role}").into(),
        thread_id: thread.id.clone(),
        role,
        content: format!("message {i}"),
        model: None,
        prompt_tokens: (role == Role::Assistant).then_some(10),
        completion_tokens: (role == Role::Assistant).then_some(5),
        sources: None,
        latency_ms: None,
        status: ReplyStatus::Complete,
        error: None,
        created_at: at,
        tool_calls: None,
        api_key_id: None,
    }
}

/// A crawled document `d1` of agent `a1` (user `u1`, from [`thread_of_new_user`]).
async fn crawled_document(store: &dyn Store) -> DocumentRecord {
    let thread = thread_of_new_user(store).await;
    crawl_document(
        store,
        "d1",
        &thread.agent_id,
        &thread.user_id,
        "https://example.com/",
    )
    .await
}

/// A web site document `id` of `agent_id` starting at `url`, with its queued crawl job.
async fn crawl_document(
    store: &dyn Store,
    id: &str,
    agent_id: &AgentId,
    user_id: &UserId,
    url: &str,
) -> DocumentRecord {
    let now = Utc::now();
    let doc = DocumentRecord::pending_url(
        DocumentId::from(id),
        agent_id,
        user_id,
        url,
        None,
        None,
        now,
    );
    let job = JobRecord::queued(JobKind::Crawl, &doc.id, &doc.user_id, now);
    store.create_document(&doc, &job).await.unwrap();
    doc
}

/// The page `url` with one chunk per entry of `words` (each its text).
fn page(url: &str, words: &[&str]) -> (PageRecord, Vec<NewChunk>) {
    let record = PageRecord {
        url: url.into(),
        title: format!("Title of {url}"),
        content_hash: format!("hash of {}", words.join(" ")),
        ..PageRecord::default()
    };
    let chunks = words
        .iter()
        .enumerate()
        .map(|(i, word)| NewChunk {
            page_url: Some(url.into()),
            title: record.title.clone(),
            heading_path: String::new(),
            position: i as u32,
            page: None,
            tokens: 1,
            text: (*word).into(),
        })
        .collect();
    (record, chunks)
}

/// Runs `n` copies of `task` (given their index) as parallel tasks and returns their
/// results in index order.
async fn in_parallel<T, Fut>(n: usize, task: impl Fn(usize) -> Fut) -> Vec<T>
where
    T: Send + 'static,
    Fut: Future<Output = T> + Send + 'static,
{
    let handles: Vec<_> = (0..n).map(|i| tokio::spawn(task(i))).collect();
    let mut out = Vec::with_capacity(n);
    for handle in handles {
        out.push(handle.await.expect("a parallel task panicked"));
    }
    out
}

/// The Telegram integration `id` of `user_id`, linked to no agent.
pub(super) fn integration(
    id: &str,
    user_id: &UserId,
) -> agentchat::store::integrations::IntegrationRecord {
    let now = Utc::now();
    agentchat::store::integrations::IntegrationRecord {
        id: id.into(),
        user_id: user_id.clone(),
        provider_code: agentchat::domain::ProviderCode::Telegram,
        name: format!("bot {id}"),
        agent_id: None,
        config: "{}".into(),
        credentials_sealed: Vec::new(),
        key_id: "k".into(),
        credential_hints: "{}".into(),
        status: agentchat::store::integrations::IntegrationStatus::Active,
        status_detail: None,
        public_id: None,
        inbound_secret_hash: None,
        created_at: now,
        updated_at: now,
    }
}
