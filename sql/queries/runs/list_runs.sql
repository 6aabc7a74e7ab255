-- The latest runs of the namespaces, with their error and warning counts. Parameters: namespace ids, limit.
SELECT r.id AS run_id, n.name AS namespace, r.command, r.status, r.started_at, r.finished_at, r.counts,
       (SELECT count(*) FROM kbctl.run_errors e WHERE e.namespace_id = r.namespace_id AND e.run_id = r.id
          AND e.error_class NOT LIKE '%%Warning') AS errors,
       (SELECT count(*) FROM kbctl.run_errors e WHERE e.namespace_id = r.namespace_id AND e.run_id = r.id
          AND e.error_class LIKE '%%Warning') AS warnings
FROM kbctl.runs r
JOIN kbctl.namespaces n ON n.id = r.namespace_id
WHERE r.namespace_id = ANY(%s)
ORDER BY r.started_at DESC, r.id DESC
LIMIT %s
