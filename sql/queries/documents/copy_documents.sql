-- Bulk load (into the session's stage table: COPY FROM is refused under row-level security) of document rows (text COPY).
COPY pg_temp.stage_documents (namespace_id, id, uri, parent_uri, source_uri, source_hash, title,
                      source_type, content_hash, metadata, char_count, chunk_count, run_id, acl, fact_keys) FROM STDIN
