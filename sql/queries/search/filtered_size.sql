-- How many chunks of the namespaces the filters keep, counted up to a limit.
-- Template: f is the filters' condition on c.metadata, its parameters bound after the namespace ids.
-- Parameters: namespace ids, the filters' parameters, the limit (threshold + 1).
SELECT count(*)
FROM (SELECT 1 FROM kbctl.chunks c WHERE c.namespace_id = ANY(%s) AND {f} LIMIT %s) x
