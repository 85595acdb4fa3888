-- Scheduled refreshes of crawled sites and the validators and links of their pages (sqlite 0014).

-- Hours between scheduled refreshes; NULL when off (uploads always).
ALTER TABLE documents ADD COLUMN refresh_hours BIGINT;
-- When the scheduler next queues a refresh (epoch ms); NULL when off.
ALTER TABLE documents ADD COLUMN next_refresh_at BIGINT;
-- When the last crawl (first or refresh) finished well (epoch ms).
ALTER TABLE documents ADD COLUMN last_refreshed_at BIGINT;
-- That crawl's page counts as JSON: {"added", "changed", "removed", "unchanged"}.
ALTER TABLE documents ADD COLUMN refresh_counts TEXT;
CREATE INDEX documents_next_refresh ON documents (next_refresh_at)
    WHERE next_refresh_at IS NOT NULL;

-- The URL requested for the page (before redirects), its `ETag` and `Last-Modified` as last
-- answered, its outgoing links as a JSON array (empty when it asked not to be followed), and
-- the size of its text in bytes (what a page answering 304 still counts into the document).
ALTER TABLE document_pages ADD COLUMN fetch_url TEXT;
ALTER TABLE document_pages ADD COLUMN etag TEXT;
ALTER TABLE document_pages ADD COLUMN last_modified TEXT;
ALTER TABLE document_pages ADD COLUMN links TEXT NOT NULL DEFAULT '[]';
ALTER TABLE document_pages ADD COLUMN bytes BIGINT NOT NULL DEFAULT 0;
