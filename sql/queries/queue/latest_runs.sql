-- The latest runs of the namespaces that had a work queue, newest first, with the counts recorded when
-- each one ended (NULL while it runs) and whether a process runs it now (its coordinator holds the
-- run's lock, ``runs/lock_run``, in this database; the locks are read once for the list).
-- Parameters: lock class, namespace ids, limit.
WITH held AS MATERIALIZED (
  SELECT l.objid::bigint AS run_key FROM pg_locks l
  WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.classid = %s
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
)
SELECT r.namespace_id, n.name, r.id, r.status, r.started_at, r.counts,
       (r.status = 'running' AND EXISTS (SELECT 1 FROM held h WHERE h.run_key = mod(r.id, 2147483648))) AS alive
FROM kbctl.runs r
JOIN kbctl.namespaces n ON n.id = r.namespace_id
WHERE r.namespace_id = ANY(%s) AND EXISTS (SELECT 1 FROM kbctl.run_items q WHERE q.namespace_id = r.namespace_id AND q.run_id = r.id)
ORDER BY r.started_at DESC, r.id DESC
LIMIT %s
