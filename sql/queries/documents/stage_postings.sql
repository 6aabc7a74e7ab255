-- The session's stage table of a bulk load of lexical_postings: the loaded columns, no constraints, dropped
-- at commit, so a tenant's role owns nothing between transactions (COPY FROM is refused into a table under row-level security).
CREATE TEMP TABLE IF NOT EXISTS stage_lexical_postings ON COMMIT DROP AS
SELECT namespace_id, term, chunk_id, tf, dl FROM kbctl.lexical_postings WITH NO DATA
