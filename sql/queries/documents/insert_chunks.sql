-- The staged chunks rows moved into the table (each checked by its row-level security policy).
WITH s AS (DELETE FROM pg_temp.stage_chunks RETURNING namespace_id, id, document_id, position, text, token_count, char_start, char_end, heading_path, page, content_hash, metadata, lex_length)
INSERT INTO kbctl.chunks (namespace_id, id, document_id, position, text, token_count, char_start, char_end, heading_path, page, content_hash, metadata, lex_length)
SELECT namespace_id, id, document_id, position, text, token_count, char_start, char_end, heading_path, page, content_hash, metadata, lex_length FROM s
