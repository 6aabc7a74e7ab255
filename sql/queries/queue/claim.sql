-- Claim queued items of a running run from a position on, leased to a worker, while the run's
-- coordinator is alive: it holds the run's lock (``runs/lock_run``) in this database (a run whose
-- coordinator is gone gets no more writes, whoever holds the namespace's ingest lock meanwhile).
-- Parameters: namespace id, run id, first position, namespace id, run id, lock class, run id,
-- how many, worker, lease seconds.
WITH c AS (
  SELECT q.namespace_id, q.run_id, q.item FROM kbctl.run_items q
  WHERE q.namespace_id = %s AND q.run_id = %s AND q.item >= %s AND q.state = 'queued'
    AND EXISTS (SELECT 1 FROM kbctl.runs r WHERE r.namespace_id = %s AND r.id = %s AND r.status = 'running')
    AND kbctl.run_coordinated(%s, %s)
  ORDER BY q.item
  LIMIT %s
  FOR UPDATE SKIP LOCKED
)
UPDATE kbctl.run_items q
SET state = 'claimed', worker = %s, claimed_until = now() + make_interval(secs => %s), attempts = q.attempts + 1
FROM c
WHERE q.namespace_id = c.namespace_id AND q.run_id = c.run_id AND q.item = c.item
RETURNING q.item, q.target, q.rel, q.attempts
