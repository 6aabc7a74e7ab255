-- Claim the items of a running run left queued below the workers' positions or whose lease expired
-- (their worker was killed or stalled), tried fewer than a number of times; read once the queue
-- ahead is empty. Parameters as claim.sql, with the most attempts instead of a first position.
WITH c AS (
  SELECT q.namespace_id, q.run_id, q.item FROM kbctl.run_items q
  WHERE q.namespace_id = %(ns)s AND q.run_id = %(run)s AND q.attempts < %(attempts)s
    AND (q.state = 'queued' OR (q.state = 'claimed' AND q.claimed_until < now()))
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
