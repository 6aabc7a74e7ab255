-- Bulk load (into the session's stage table: COPY FROM is refused under row-level security) of lexical postings (binary COPY).
COPY pg_temp.stage_lexical_postings (namespace_id, term, chunk_id, tf, dl) FROM STDIN (FORMAT BINARY)
