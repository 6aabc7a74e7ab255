-- Ingest figures from the run ledger, per namespace of a tenant: runs by status, the 'running' runs
-- no process runs any more (``dead_runs``: their coordinator holds no run lock, ``runs/lock_run``;
-- the namespace's next run marks them interrupted), documents, chunks and recorded item errors. The
-- locks are read once for the list. Parameters: lock class, tenant.
WITH held AS MATERIALIZED (SELECT k AS run_key FROM kbctl.held_run_keys(%s) k)
SELECT n.name,
       (SELECT count(*) FROM kbctl.runs r WHERE r.namespace_id = n.id) AS runs,
       (SELECT coalesce(jsonb_object_agg(s.status, s.c), '{}') FROM
           (SELECT status, count(*) AS c FROM kbctl.runs r WHERE r.namespace_id = n.id GROUP BY status) s) AS runs_by_status,
       (SELECT count(*) FROM kbctl.runs r WHERE r.namespace_id = n.id AND r.status = 'running'
          AND NOT EXISTS (SELECT 1 FROM held h WHERE h.run_key = kbctl.run_lock_key(r.id))) AS dead_runs,
       (SELECT count(*) FROM kbctl.documents d WHERE d.namespace_id = n.id) AS documents,
       (SELECT count(*) FROM kbctl.chunks c WHERE c.namespace_id = n.id) AS chunks,
       (SELECT count(*) FROM kbctl.run_errors e WHERE e.namespace_id = n.id) AS errors
FROM kbctl.namespaces n
WHERE n.tenant = %s
ORDER BY n.name
