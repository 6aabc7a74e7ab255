-- Claim queued items of a running run from a position on, leased to a worker, while the run's
-- coordinator holds the namespace's ingest lock (a run whose coordinator is gone gets no more
-- writes). Parameters: namespace id, run id, first position, lock class, namespace id, how many,
-- worker, lease seconds.
WITH c AS (
  SELECT q.namespace_id, q.run_id, q.item FROM kbctl.run_items q
  WHERE q.namespace_id = %s AND q.run_id = %s AND q.item >= %s AND q.state = 'queued'
    AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                  AND l.classid = %s AND l.objid = %s)
  ORDER BY q.item
  LIMIT %s
  FOR UPDATE SKIP LOCKED
)
UPDATE kbctl.run_items q
SET state = 'claimed', worker = %s, claimed_until = now() + make_interval(secs => %s), attempts = q.attempts + 1
FROM c
WHERE q.namespace_id = c.namespace_id AND q.run_id = c.run_id AND q.item = c.item
RETURNING q.item, q.target, q.rel, q.attempts
