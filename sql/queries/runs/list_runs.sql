-- The latest runs of the namespaces, with their error and warning counts, and whether a process runs
-- each one now (``alive``: its coordinator holds the run's lock, ``runs/lock_run``, in this database;
-- a 'running' run without one was killed). The locks are read once for the list. Parameters: lock
-- class, namespace ids, limit.
WITH held AS MATERIALIZED (SELECT k AS run_key FROM kbctl.held_run_keys(%s) k)
SELECT r.id AS run_id, n.name AS namespace, r.command, r.status, r.started_at, r.finished_at, r.counts,
       (SELECT count(*) FROM kbctl.run_errors e WHERE e.namespace_id = r.namespace_id AND e.run_id = r.id
          AND e.error_class NOT LIKE '%%Warning') AS errors,
       (SELECT count(*) FROM kbctl.run_errors e WHERE e.namespace_id = r.namespace_id AND e.run_id = r.id
          AND e.error_class LIKE '%%Warning') AS warnings,
       (r.status = 'running' AND EXISTS (SELECT 1 FROM held h WHERE h.run_key = kbctl.run_lock_key(r.id))) AS alive
FROM kbctl.runs r
JOIN kbctl.namespaces n ON n.id = r.namespace_id
WHERE r.namespace_id = ANY(%s)
ORDER BY r.started_at DESC, r.id DESC
LIMIT %s
