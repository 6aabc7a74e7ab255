-- Whether a kbctl index exists and is valid (a CREATE INDEX CONCURRENTLY that failed leaves an
-- invalid one). Parameters: index name.
SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE c.relnamespace = 'kbctl'::regnamespace AND c.relname = %s
