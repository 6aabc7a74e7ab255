-- Bulk load of document rows (text COPY).
COPY kbctl.documents (namespace_id, id, uri, parent_uri, source_uri, source_hash, title,
                      source_type, content_hash, metadata, char_count, chunk_count, run_id, acl) FROM STDIN
