-- Bulk load (into the session's stage table: COPY FROM is refused under row-level security) of chunk rows (binary COPY: the column types are set by the writer, in this order).
COPY pg_temp.stage_chunks (namespace_id, id, document_id, position, text, token_count, char_start, char_end, heading_path,
                   page, content_hash, metadata, lex_length) FROM STDIN (FORMAT BINARY)
