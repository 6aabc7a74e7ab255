-- How many of the first chunks of the namespaces the filters keep, counted up to a limit: the
-- plain bounded count, reading at most a given number of chunks in key order (namespace_id, id:
-- chunks_pkey, no sort) and stopping at the limit-th match (kbctl.store.search: a filter that
-- reaches its limit there is broad, and the count is the limit). With the count, the key of the
-- chunk it stopped at: a count that goes on reads the chunks after it (search/filtered_rest).
-- No row: the namespaces ended before the limit and before the most chunks read.
-- Template: f is the filters' condition on c.metadata (its key, namespace and document).
-- Parameters: the filters' parameters, namespace ids, the most chunks read, the limit, the most
-- chunks read again.
SELECT p.matches, p.namespace_id, p.id
FROM (
    SELECT c.namespace_id, c.id,
           count(*) FILTER (WHERE c.kept) OVER w AS matches,
           row_number() OVER w AS n
    FROM (
        SELECT c.namespace_id, c.id, ({f}) AS kept
        FROM kbctl.chunks c
        WHERE c.namespace_id = ANY(%s)
        ORDER BY c.namespace_id, c.id
        LIMIT %s
    ) c
    WINDOW w AS (ORDER BY c.namespace_id, c.id ROWS UNBOUNDED PRECEDING)
) p
WHERE p.matches >= %s OR p.n = %s
LIMIT 1
