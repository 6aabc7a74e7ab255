-- The session's stage table of a bulk load of chunks: the loaded columns, no constraints, dropped
-- at commit, so a tenant's role owns nothing between transactions (COPY FROM is refused into a table under row-level security).
CREATE TEMP TABLE IF NOT EXISTS stage_chunks ON COMMIT DROP AS
SELECT namespace_id, id, document_id, position, text, token_count, char_start, char_end, heading_path, page, content_hash, metadata, lex_length FROM kbctl.chunks WITH NO DATA
