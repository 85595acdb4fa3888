-- Scheduled refreshes of crawled sites (docs/knowledge.md § Refresh) and the HTTP validators
-- and outgoing links of their pages, so that a re-crawl asks with conditional requests and
-- still follows the links of a page answering 304 Not Modified.

-- Hours between scheduled refreshes; NULL when off (uploads always).
ALTER TABLE documents ADD COLUMN refresh_hours INTEGER;
-- When the scheduler next queues a refresh (epoch ms); NULL when off.
ALTER TABLE documents ADD COLUMN next_refresh_at INTEGER;
-- When the last crawl (first or refresh) finished well (epoch ms).
ALTER TABLE documents ADD COLUMN last_refreshed_at INTEGER;
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
ALTER TABLE document_pages ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
