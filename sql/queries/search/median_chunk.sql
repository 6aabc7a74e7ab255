-- The chunk id at an offset in id order over the namespaces (the median, to split the lexical lane).
-- Parameters: namespace ids, the offset.
SELECT id
FROM kbctl.chunks
WHERE namespace_id = ANY(%s)
ORDER BY id
OFFSET %s
LIMIT 1
