//! [`UploadStore`] on PostgreSQL: `document_uploads`, one row per file document, written
//! with the document and its job and deleted with the document.

use async_trait::async_trait;

use super::{begin, documents::shared::insert_document, jobs::shared::insert_job, PgStore};
use crate::ids::DocumentId;
use crate::store::{documents::DocumentRecord, jobs::JobRecord, uploads::UploadStore, StoreResult};

#[async_trait]
impl UploadStore for PgStore {
    async fn create_file_document(
        &self,
        doc: &DocumentRecord,
        job: &JobRecord,
        bytes: &[u8],
    ) -> StoreResult<()> {
        let mut tx = begin(&self.pool).await?;
        insert_document(&mut tx, doc).await?;
        sqlx::query("INSERT INTO document_uploads (document_id, bytes) VALUES ($1, $2)")
            .bind(&doc.id)
            .bind(bytes)
            .execute(&mut *tx)
            .await?;
        insert_job(&mut *tx, job, "").await?;
        tx.commit().await?;
        Ok(())
    }

    async fn upload(&self, document_id: &DocumentId) -> StoreResult<Option<Vec<u8>>> {
        Ok(
            sqlx::query_scalar("SELECT bytes FROM document_uploads WHERE document_id = $1")
                .bind(document_id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    async fn remove_uploads(&self, documents: &[DocumentId]) -> StoreResult<()> {
        if documents.is_empty() {
            return Ok(());
        }
        let ids: Vec<&str> = documents.iter().map(DocumentId::as_str).collect();
        sqlx::query("DELETE FROM document_uploads WHERE document_id = ANY($1)")
            .bind(&ids)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
