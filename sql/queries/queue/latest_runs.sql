-- The latest runs of the namespaces that had a work queue, newest first, with the counts recorded when
-- each one ended (NULL while it runs). Parameters: namespace ids, limit.
SELECT r.namespace_id, n.name, r.id, r.status, r.started_at, r.counts FROM kbctl.runs r
JOIN kbctl.namespaces n ON n.id = r.namespace_id
WHERE r.namespace_id = ANY(%s) AND EXISTS (SELECT 1 FROM kbctl.run_items q WHERE q.namespace_id = r.namespace_id AND q.run_id = r.id)
ORDER BY r.started_at DESC, r.id DESC
LIMIT %s
