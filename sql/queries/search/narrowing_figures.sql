-- What the choice to narrow a filter through kbctl.metadata_values reads: how many chunks the
-- namespaces hold (their statistics rows), and how many rows the planner takes kbctl.chunks to
-- hold (pg_class.reltuples: 0 or -1 before the first ANALYZE, e.g. right after a bulk ingest into a
-- new database, when it would look each entry's chunk up by chunks_document, reading the whole
-- namespace per entry).
-- Parameters: namespace ids.
SELECT (SELECT coalesce(sum(s.chunk_count), 0) FROM kbctl.lexical_stats s WHERE s.namespace_id = ANY(%s)),
       (SELECT c.reltuples FROM pg_class c WHERE c.oid = 'kbctl.chunks'::regclass)
