-- How many chunks the namespaces hold (from their statistics row: no scan of the chunks).
-- Parameters: namespace ids.
SELECT coalesce(sum(chunk_count), 0)
FROM kbctl.lexical_stats
WHERE namespace_id = ANY(%s)
