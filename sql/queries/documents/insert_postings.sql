-- The staged lexical_postings rows moved into the table (each checked by its row-level security policy).
WITH s AS (DELETE FROM pg_temp.stage_lexical_postings RETURNING namespace_id, term, chunk_id, tf, dl)
INSERT INTO kbctl.lexical_postings (namespace_id, term, chunk_id, tf, dl)
SELECT namespace_id, term, chunk_id, tf, dl FROM s
