-- Claim the items of a running run left queued below the workers' positions or whose lease expired
-- (their worker was killed or stalled), tried fewer than a number of times; read once the queue
-- ahead is empty. Only while the run's coordinator is alive, as ``claim``. Parameters: namespace
-- id, run id, most attempts, namespace id, run id, lock class, run id, how many, worker, lease
-- seconds.
WITH c AS (
  SELECT q.namespace_id, q.run_id, q.item FROM kbctl.run_items q
  WHERE q.namespace_id = %s AND q.run_id = %s AND q.attempts < %s
    AND (q.state = 'queued' OR (q.state = 'claimed' AND q.claimed_until < now()))
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
