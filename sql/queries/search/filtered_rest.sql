-- How many chunks of the namespaces after a key (namespace_id, id) the filters keep, counted up to
-- a limit: the plain count going on where search/filtered_probe stopped, reading chunks_pkey's
-- range after the key in its order (the probe's chunks are not read again). The filters are kept
-- out of the ordered reading (OFFSET 0): pushed into it, their estimate of few rows made the
-- planner read every chunk after the key and sort the matches before the limit could stop it.
-- Template: f is the filters' condition on c.metadata.
-- Parameters: namespace ids, the key's namespace id and chunk id, the filters' parameters, the
-- limit (what the probe's matches leave of it).
SELECT count(*)
FROM (
    SELECT 1
    FROM (
        SELECT c.namespace_id, c.id, c.document_id, c.metadata
        FROM kbctl.chunks c
        WHERE c.namespace_id = ANY(%s) AND (c.namespace_id, c.id) > (%s::integer, %s::bigint)
        ORDER BY c.namespace_id, c.id
        OFFSET 0
    ) c
    WHERE {f}
    LIMIT %s
) x
