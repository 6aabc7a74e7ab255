-- Running runs of the namespaces with items to claim and a live coordinator (one holding the run's
-- lock, ``runs/lock_run``, in this database), oldest first. Parameters: namespace ids, lock class.
SELECT r.namespace_id, r.id FROM kbctl.runs r
WHERE r.namespace_id = ANY(%s) AND r.status = 'running'
  AND EXISTS (SELECT 1 FROM kbctl.run_items q WHERE q.namespace_id = r.namespace_id AND q.run_id = r.id
                AND q.state IN ('queued', 'claimed'))
  AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                AND l.classid = %s AND l.objid::bigint = mod(r.id, 2147483648))
ORDER BY r.started_at, r.id
