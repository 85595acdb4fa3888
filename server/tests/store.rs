//! The store conformance suite (`agentchat::store::conformance`): one test per case, each
//! on a fresh, migrated, empty database of the backend under test.
//!
//! The backend comes from `AGENTCHAT_TEST_DATABASE_URL`: unset (or a `sqlite:` URL), a
//! SQLite file in a temporary folder per case; a `postgres://` URL names a server on which
//! each case gets a scratch database of its own, dropped after the case.

use std::sync::Arc;

use agentchat::store::{self, conformance, scratch::ScratchDatabase, Store};

/// A migrated store for one case, with what keeps its database alive.
struct Fresh {
    store: Arc<dyn Store>,
    /// The temporary folder of a SQLite database (removed when dropped).
    _dir: Option<tempfile::TempDir>,
    /// The scratch database on a server (dropped after the store).
    _database: Option<ScratchDatabase>,
}

async fn fresh() -> Fresh {
    let url = std::env::var("AGENTCHAT_TEST_DATABASE_URL").unwrap_or_default();
    let (url, dir, database) = if url.is_empty() || url.starts_with("sqlite:") {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let url = format!("sqlite://{}", dir.path().join("store.db").display());
        (url, Some(dir), None)
    } else {
        let database = ScratchDatabase::create(&url)
            .await
            .expect("creating a scratch database");
        (database.url().to_string(), None, Some(database))
    };
    let store = store::connect(&url).await.expect("opening the store");
    store.migrate().await.expect("migrating the store");
    Fresh {
        store,
        _dir: dir,
        _database: database,
    }
}

macro_rules! cases {
    ($($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let fresh = fresh().await;
                conformance::$case(fresh.store.clone()).await;
            }
        )*
    };
}

agentchat::for_each_store_conformance_case!(cases);

/// Instances starting at once all migrate the same database: each succeeds, and the
/// migrations are applied once (sqlx's migrator takes an advisory lock on PostgreSQL; on
/// SQLite the write lock serialises them).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn instances_migrating_one_database_at_once_all_start() {
    let server = std::env::var("AGENTCHAT_TEST_DATABASE_URL").unwrap_or_default();
    let dir = tempfile::tempdir().expect("a temporary folder");
    let (url, _database) = if server.is_empty() || server.starts_with("sqlite:") {
        let url = format!("sqlite://{}", dir.path().join("store.db").display());
        (url, None)
    } else {
        let database = ScratchDatabase::create(&server)
            .await
            .expect("creating a scratch database");
        (database.url().to_string(), Some(database))
    };
    let starts = (0..4).map(|_| {
        let url = url.clone();
        tokio::spawn(async move {
            let store = store::connect(&url).await?;
            store.migrate().await?;
            anyhow::Ok(())
        })
    });
    for started in futures::future::join_all(starts).await {
        started
            .expect("the start did not panic")
            .expect("the instance migrated and started");
    }
    let store = store::connect(&url).await.expect("opening the store");
    conformance::an_email_is_taken_once(store).await;
}
