//! The store conformance suite (`agentchat::store::conformance`): one test per case, each
//! on a fresh, migrated, empty database of the backend under test.
//!
//! The backend comes from `AGENTCHAT_TEST_DATABASE_URL`: unset (or a `sqlite:` URL), a
//! SQLite file in a temporary folder per case. Any other URL is opened with
//! `store::connect` and must name an empty database; every case needs its own, so a
//! server backend's harness gives each case a new database there.

use std::sync::Arc;

use agentchat::store::{self, conformance, Store};

/// A migrated store for one case, with what keeps its database alive.
struct Fresh {
    store: Arc<dyn Store>,
    /// The temporary folder of a SQLite database (removed when dropped).
    _dir: Option<tempfile::TempDir>,
}

async fn fresh() -> Fresh {
    let url = std::env::var("AGENTCHAT_TEST_DATABASE_URL").unwrap_or_default();
    let (url, dir) = if url.is_empty() || url.starts_with("sqlite:") {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let url = format!("sqlite://{}", dir.path().join("store.db").display());
        (url, Some(dir))
    } else {
        (url, None)
    };
    let store = store::connect(&url).await.expect("opening the store");
    store.migrate().await.expect("migrating the store");
    Fresh { store, _dir: dir }
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
