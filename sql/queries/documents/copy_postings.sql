-- Bulk load of lexical postings (binary COPY).
COPY kbctl.lexical_postings (namespace_id, term, chunk_id, tf, dl) FROM STDIN (FORMAT BINARY)
