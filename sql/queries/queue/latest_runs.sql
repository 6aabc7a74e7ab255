-- The latest runs of the namespaces that had a work queue, newest first, with the counts recorded when
-- each one ended (NULL while it runs) and whether a process runs it now (its coordinator holds the
-- run's lock, ``runs/lock_run``, in this database; the locks are read once for the list).
-- Parameters: lock class, namespace ids, limit.
WITH held AS MATERIALIZED (SELECT k AS run_key FROM kbctl.held_run_keys(%s) k)
SELECT r.namespace_id, n.name, r.id, r.status, r.started_at, r.counts,
       (r.status = 'running' AND EXISTS (SELECT 1 FROM held h WHERE h.run_key = kbctl.run_lock_key(r.id))) AS alive
FROM kbctl.runs r
JOIN kbctl.namespaces n ON n.id = r.namespace_id
WHERE r.namespace_id = ANY(%s) AND EXISTS (SELECT 1 FROM kbctl.run_items q WHERE q.namespace_id = r.namespace_id AND q.run_id = r.id)
ORDER BY r.started_at DESC, r.id DESC
LIMIT %s
