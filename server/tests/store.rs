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
    /// The URL the store was opened from.
    url: String,
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
        url,
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

/// [`store::uploads::UploadStore`] of the backend under test, as the service picks it
/// ([`store::uploads::for_backend`]): an upload stored through one handle of the database
/// is read through another one (as another instance's worker reads it), a document that
/// cannot be created leaves no upload, and a deleted document's upload is gone once its
/// removal was asked for (PostgreSQL: at once, with the document).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_is_read_through_another_handle_and_deleted_with_its_document() {
    use agentchat::{
        domain::Email,
        ids::{AgentId, DocumentId, UserId},
        store::{
            agents::AgentStatus,
            documents::DocumentRecord,
            jobs::{JobKind, JobRecord},
            AgentRecord, NewUser,
        },
    };
    use chrono::Utc;

    let fresh = fresh().await;
    let folder = tempfile::tempdir().expect("a temporary folder");
    let dir = folder.path().join("uploads");
    let other = store::connect(&fresh.url)
        .await
        .expect("opening a second handle");
    let one = store::uploads::for_backend(&fresh.url, fresh.store.clone(), &dir)
        .expect("the upload store");
    let two = store::uploads::for_backend(&fresh.url, other.clone(), &dir)
        .expect("the second handle's upload store");
    let now = Utc::now();
    let user = fresh
        .store
        .create_user(NewUser {
            id: UserId::from("u1"),
            email: Email::parse("u1@example.com").expect("an email"),
            name: "One".into(),
            password_hash: None,
            company: None,
            country: None,
            phone: None,
            email_verified: true,
            now,
        })
        .await
        .expect("creating a user");
    let agent = AgentRecord {
        id: AgentId::from("a1"),
        user_id: user.id.clone(),
        name: "Agent".into(),
        description: String::new(),
        system_prompt: String::new(),
        model: String::new(),
        status: AgentStatus::Active,
        created_at: now,
        updated_at: now,
        has_knowledge: false,
    };
    assert!(fresh.store.create_agent(&agent, 10).await.unwrap());
    let bytes: Vec<u8> = (0..=255u8).cycle().take(300_000).collect();
    let doc = DocumentRecord::pending_file(
        DocumentId::new(),
        &agent.id,
        &user.id,
        "notes.txt".into(),
        "text",
        bytes.len() as u64,
        now,
    );
    let job = JobRecord::queued(JobKind::Ingest, &doc.id, &user.id, now);
    one.create_file_document(&doc, &job, &bytes)
        .await
        .expect("storing an upload");
    assert_eq!(
        two.upload(&doc.id).await.unwrap().as_deref(),
        Some(bytes.as_slice()),
        "the upload is read through another handle"
    );
    let claimed = other
        .claim_job(now, now + chrono::Duration::seconds(60))
        .await
        .unwrap()
        .expect("the upload's job, seen through the other handle");
    assert_eq!(claimed.document_id, doc.id);

    // A document that cannot be stored (its agent is unknown) keeps no upload.
    let orphan = DocumentRecord::pending_file(
        DocumentId::new(),
        &AgentId::from("nobody"),
        &user.id,
        "orphan.txt".into(),
        "text",
        3,
        now,
    );
    let orphan_job = JobRecord::queued(JobKind::Ingest, &orphan.id, &user.id, now);
    assert!(one
        .create_file_document(&orphan, &orphan_job, b"abc")
        .await
        .is_err());
    assert_eq!(two.upload(&orphan.id).await.unwrap(), None);
    assert_eq!(one.upload(&orphan.id).await.unwrap(), None);

    // Deleted with its document.
    assert!(fresh
        .store
        .delete_document(&user.id, &agent.id, &doc.id)
        .await
        .unwrap());
    if store::Backend::of(&fresh.url) == Some(store::Backend::Postgres) {
        assert_eq!(
            two.upload(&doc.id).await.unwrap(),
            None,
            "the database's upload goes with its document"
        );
    }
    one.remove_uploads(std::slice::from_ref(&doc.id))
        .await
        .expect("removing the upload");
    assert_eq!(two.upload(&doc.id).await.unwrap(), None);
    assert_eq!(one.upload(&doc.id).await.unwrap(), None);
}
