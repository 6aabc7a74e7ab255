-- Running runs of the namespaces with items to claim and a live coordinator (one holding the run's
-- lock, ``runs/lock_run``, in this database), oldest first. Parameters: namespace ids, lock class.
SELECT r.namespace_id, r.id FROM kbctl.runs r
WHERE r.namespace_id = ANY(%s) AND r.status = 'running'
  AND EXISTS (SELECT 1 FROM kbctl.run_items q WHERE q.namespace_id = r.namespace_id AND q.run_id = r.id
                AND q.state IN ('queued', 'claimed'))
  AND kbctl.run_coordinated(%s, r.id)
ORDER BY r.started_at, r.id
