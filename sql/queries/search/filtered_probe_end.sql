-- The key (namespace_id, id) of the last chunk search/filtered_probe read when it did not stop at
-- its limit: the given number's chunk in key order (chunks_pkey, its entries only). No row: the
-- namespaces hold fewer chunks, the probe read them all.
-- Parameters: namespace ids, the most chunks the probe read, minus one.
SELECT c.namespace_id, c.id
FROM kbctl.chunks c
WHERE c.namespace_id = ANY(%s)
ORDER BY c.namespace_id, c.id
OFFSET %s
LIMIT 1
