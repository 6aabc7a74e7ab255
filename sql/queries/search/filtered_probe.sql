-- How many of the first chunks of the namespaces the filters keep, counted up to a limit: the
-- plain bounded count, reading at most a given number of chunks (kbctl.store.search: a filter that
-- reaches its limit there is broad, and the count is the limit).
-- Template: f is the filters' condition on c.metadata (its key, namespace and document), its
-- parameters bound after the number of chunks read.
-- Parameters: namespace ids, the most chunks read, the filters' parameters, the limit.
SELECT count(*)
FROM (
    SELECT 1
    FROM (SELECT c.namespace_id, c.id, c.document_id, c.metadata FROM kbctl.chunks c WHERE c.namespace_id = ANY(%s) LIMIT %s) c
    WHERE {f}
    LIMIT %s
) x
