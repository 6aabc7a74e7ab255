-- Ingest figures from the run ledger, per namespace of a tenant: runs by status, documents,
-- chunks and recorded item errors. Parameters: tenant.
SELECT n.name,
       (SELECT count(*) FROM kbctl.runs r WHERE r.namespace_id = n.id) AS runs,
       (SELECT coalesce(jsonb_object_agg(s.status, s.c), '{}') FROM
           (SELECT status, count(*) AS c FROM kbctl.runs r WHERE r.namespace_id = n.id GROUP BY status) s) AS runs_by_status,
       (SELECT count(*) FROM kbctl.documents d WHERE d.namespace_id = n.id) AS documents,
       (SELECT count(*) FROM kbctl.chunks c WHERE c.namespace_id = n.id) AS chunks,
       (SELECT count(*) FROM kbctl.run_errors e WHERE e.namespace_id = n.id) AS errors
FROM kbctl.namespaces n
WHERE n.tenant = %s
ORDER BY n.name
