//! The cluster bus as the application builds it (`agentchat::cluster`): on PostgreSQL each
//! instance holds one connection of the bus, publishes what its services forget and wakes
//! the workers of the others when work is queued; on SQLite there is no bus. Runs on every
//! pass of the suite, on the PostgreSQL server of `AGENTCHAT_TEST_DATABASE_URL` (the local
//! server when unset).

use std::{sync::Arc, time::Duration};
use test_support::scratch::ScratchDatabase;

use agentchat::cluster::{APPLICATION_NAME, INVALIDATE_CHANNEL};
use serde_json::Value;
use sqlx::postgres::PgListener;

use crate::helpers::*;

/// Connections of the bus to the database at `url`.
async fn bus_connections(url: &str) -> i64 {
    let pool = sqlx::PgPool::connect(url).await.unwrap();
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity \
         WHERE datname = current_database() AND application_name = $1",
    )
    .bind(APPLICATION_NAME)
    .fetch_one(&pool)
    .await
    .unwrap()
}

/// The next message on the invalidation channel, as JSON.
async fn next(wire: &mut PgListener) -> Value {
    let message = tokio::time::timeout(Duration::from_secs(2), wire.recv())
        .await
        .expect("a message is published")
        .unwrap();
    serde_json::from_str(message.payload()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_on_postgres_share_invalidations_and_wake_ups_through_the_bus() {
    let server = test_database_server()
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".to_string());
    let database = Arc::new(
        ScratchDatabase::create(&server)
            .await
            .unwrap_or_else(|e| panic!("this test needs PostgreSQL at {server}: {e}")),
    );
    // B works no queue, so the wake-ups its workers would take stay visible.
    let a = spawn_app_on(tempfile::tempdir().unwrap(), Some(database.clone()), |_| {}).await;
    let b = spawn_app_on(tempfile::tempdir().unwrap(), Some(database.clone()), |c| {
        c.jobs.workers = 0;
    })
    .await;
    assert_eq!(
        bus_connections(database.url()).await,
        2,
        "one bus connection per instance"
    );

    // What A's services forget is published, with A's origin.
    let mut wire = PgListener::connect(database.url()).await.unwrap();
    wire.listen(INVALIDATE_CHANNEL).await.unwrap();
    a.state.auth.forget_key(&"k1".into());
    let message = next(&mut wire).await;
    assert_eq!(
        (&message["kind"], &message["id"]),
        (&"api_key".into(), &"k1".into())
    );
    assert!(message["origin"].as_str().is_some_and(|o| !o.is_empty()));
    a.state.agents.knowledge_changed(&"a1".into());
    let message = next(&mut wire).await;
    assert_eq!(
        (&message["kind"], &message["id"]),
        (&"agent".into(), &"a1".into())
    );
    a.state.webhooks.events.forget(&"u1".into());
    let message = next(&mut wire).await;
    assert_eq!(
        (&message["kind"], &message["id"]),
        (&"webhooks".into(), &"u1".into())
    );

    // Work queued through A wakes B's workers.
    a.state.knowledge.job_queued();
    tokio::time::timeout(Duration::from_secs(2), b.state.knowledge.wake.notified())
        .await
        .expect("B's job workers are woken");
    a.state.webhooks.events.deliveries_queued();
    tokio::time::timeout(
        Duration::from_secs(2),
        b.state.webhooks.events.wake.notified(),
    )
    .await
    .expect("B's delivery worker is woken");
}

#[tokio::test]
async fn on_sqlite_nothing_crosses_the_process() {
    // No workers, so the wake-up stays visible.
    let app = spawn_app_on(tempfile::tempdir().unwrap(), None, |c| c.jobs.workers = 0).await;
    assert!(app.database_url.starts_with("sqlite:"));
    // Forgetting works as before, and publishes nowhere (there is no bus to fail).
    app.state.auth.forget_key(&"k1".into());
    app.state.agents.knowledge_changed(&"a1".into());
    app.state.knowledge.job_queued();
    tokio::time::timeout(Duration::from_secs(1), app.state.knowledge.wake.notified())
        .await
        .expect("the service wakes its own workers");
}
