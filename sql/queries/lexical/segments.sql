-- The packed segments of the namespaces, each with the chunk id range it covers.
-- Parameters: namespace ids.
SELECT namespace_id, segment, lo, hi, chunks
FROM kbctl.lexical_segments
WHERE namespace_id = ANY(%s)
ORDER BY namespace_id, segment
