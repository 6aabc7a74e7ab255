-- N (chunks) and the total lexical length over the namespaces, for BM25's idf and avgdl.
-- Parameters: namespace ids.
SELECT coalesce(sum(chunk_count), 0)::float8, coalesce(sum(total_length), 0)::float8
FROM kbctl.lexical_stats
WHERE namespace_id = ANY(%s)
