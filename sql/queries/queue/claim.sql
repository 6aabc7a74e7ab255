-- Claim queued items of a running run from a position on, leased to a worker, while the run's
-- coordinator holds the namespace's ingest lock (a run whose coordinator is gone gets no more
-- writes). Parameters: worker, lease seconds, namespace id, run id, first position, how many,
-- lock class, namespace id.
WITH c AS (
  SELECT q.namespace_id, q.run_id, q.item FROM kbctl.run_items q
  WHERE q.namespace_id = %(ns)s AND q.run_id = %(run)s AND q.item >= %(floor)s AND q.state = 'queued'
    AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                  AND l.classid = %(lock)s AND l.objid = %(ns)s)
  ORDER BY q.item
  LIMIT %(n)s
  FOR UPDATE SKIP LOCKED
)
UPDATE kbctl.run_items q
SET state = 'claimed', worker = %(worker)s, claimed_until = now() + make_interval(secs => %(lease)s),
    attempts = q.attempts + 1
FROM c
WHERE q.namespace_id = c.namespace_id AND q.run_id = c.run_id AND q.item = c.item
RETURNING q.item, q.target, q.rel, q.attempts
