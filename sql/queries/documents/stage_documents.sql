-- The session's stage table of a bulk load of documents: the loaded columns, no constraints, dropped
-- at commit, so a tenant's role owns nothing between transactions (COPY FROM is refused into a table under row-level security).
CREATE TEMP TABLE IF NOT EXISTS stage_documents ON COMMIT DROP AS
SELECT namespace_id, id, uri, parent_uri, source_uri, source_hash, title, source_type, content_hash, metadata, char_count, chunk_count, run_id, acl, fact_keys FROM kbctl.documents WITH NO DATA
