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
