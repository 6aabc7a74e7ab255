-- The staged documents rows moved into the table (each checked by its row-level security policy).
WITH s AS (DELETE FROM pg_temp.stage_documents RETURNING namespace_id, id, uri, parent_uri, source_uri, source_hash, title, source_type, content_hash, metadata, char_count, chunk_count, run_id, acl, fact_keys)
INSERT INTO kbctl.documents (namespace_id, id, uri, parent_uri, source_uri, source_hash, title, source_type, content_hash, metadata, char_count, chunk_count, run_id, acl, fact_keys)
SELECT namespace_id, id, uri, parent_uri, source_uri, source_hash, title, source_type, content_hash, metadata, char_count, chunk_count, run_id, acl, fact_keys FROM s
