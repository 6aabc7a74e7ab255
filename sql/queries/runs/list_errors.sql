-- The latest failed items of the namespaces. Parameters: namespace ids, limit.
SELECT e.run_id, n.name AS namespace, e.stage, e.source, e.error_class, e.message, e.retried, e.created_at
FROM kbctl.run_errors e
JOIN kbctl.namespaces n ON n.id = e.namespace_id
WHERE e.namespace_id = ANY(%s)
ORDER BY e.created_at DESC, e.id DESC
LIMIT %s
