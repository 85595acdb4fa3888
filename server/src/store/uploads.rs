//! Where uploaded files are kept until their document is deleted: a folder ([`UploadDir`])
//! or the PostgreSQL store's `document_uploads` table ([`for_backend`]).

use std::{
    io::ErrorKind,
    path::{Path, PathBuf},
    sync::Arc,
};

use async_trait::async_trait;

use super::{
    documents::DocumentRecord, jobs::JobRecord, Backend, DocumentStore, Store, StoreError,
    StoreResult,
};
use crate::ids::DocumentId;

/// The uploaded files of file documents (docs/api.md § Upload document), by document id.
#[async_trait]
pub trait UploadStore: Send + Sync {
    /// Stores the file document `doc`, its first job and the file's `bytes`, all or none.
    /// Errors: the store's; [`StoreError::Other`] when a file cannot be written.
    async fn create_file_document(
        &self,
        doc: &DocumentRecord,
        job: &JobRecord,
        bytes: &[u8],
    ) -> StoreResult<()>;

    /// The stored upload of `document_id`, if any. Errors: also a file that cannot be read.
    async fn upload(&self, document_id: &DocumentId) -> StoreResult<Option<Vec<u8>>>;

    /// Removes the uploads of deleted `documents`; a file that cannot be removed is logged.
    async fn remove_uploads(&self, documents: &[DocumentId]) -> StoreResult<()>;
}

/// The upload store of `database_url`'s backend: PostgreSQL's table, else the folder `dir`.
/// Errors: `dir` cannot be created.
pub fn for_backend(
    database_url: &str,
    store: Arc<dyn Store>,
    dir: &Path,
) -> anyhow::Result<Arc<dyn UploadStore>> {
    match Backend::of(database_url) {
        Some(Backend::Postgres) => store
            .database_uploads()
            .ok_or_else(|| anyhow::anyhow!("this PostgreSQL store keeps no uploads")),
        _ => Ok(Arc::new(UploadDir::new(dir.to_path_buf(), store)?)),
    }
}

/// Uploads as files in `DATA_DIR/uploads`, one per document, named by its id.
pub struct UploadDir {
    dir: PathBuf,
    documents: Arc<dyn DocumentStore>,
}

impl UploadDir {
    /// The folder `dir` (created when missing) over `documents`. Errors: it cannot be created.
    pub fn new(dir: PathBuf, documents: Arc<dyn DocumentStore>) -> std::io::Result<Self> {
        std::fs::create_dir_all(&dir)?;
        Ok(Self { dir, documents })
    }

    /// The file of `document_id`'s upload.
    pub fn path(&self, document_id: &DocumentId) -> PathBuf {
        self.dir.join(document_id.as_str())
    }
}

#[async_trait]
impl UploadStore for UploadDir {
    async fn create_file_document(
        &self,
        doc: &DocumentRecord,
        job: &JobRecord,
        bytes: &[u8],
    ) -> StoreResult<()> {
        // The file first: the job is visible to workers from the document's commit on.
        let path = self.path(&doc.id);
        tokio::fs::write(&path, bytes).await.map_err(|e| {
            StoreError::Other(anyhow::Error::new(e).context("cannot store an upload"))
        })?;
        if let Err(err) = self.documents.create_document(doc, job).await {
            let _ = tokio::fs::remove_file(&path).await;
            return Err(err);
        }
        Ok(())
    }

    async fn upload(&self, document_id: &DocumentId) -> StoreResult<Option<Vec<u8>>> {
        match tokio::fs::read(self.path(document_id)).await {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::Other(
                anyhow::Error::new(e).context("cannot read an upload"),
            )),
        }
    }

    async fn remove_uploads(&self, documents: &[DocumentId]) -> StoreResult<()> {
        for id in documents {
            match tokio::fs::remove_file(self.path(id)).await {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(document = id.as_str(), error = %e, "cannot remove an upload")
                }
            }
        }
        Ok(())
    }
}
