-- One run's items by state, the workers holding a live lease, and the items given up (claimed, their
-- lease expired, tried as many times as allowed). Parameters: most attempts, namespace id, run id.
SELECT count(*) AS items,
       count(*) FILTER (WHERE state = 'queued') AS queued,
       count(*) FILTER (WHERE state = 'claimed' AND claimed_until >= now()) AS claimed,
       count(*) FILTER (WHERE state = 'claimed' AND claimed_until < now() AND attempts < %s) AS expired,
       count(*) FILTER (WHERE state = 'done') AS done,
       count(*) FILTER (WHERE state = 'failed') AS failed,
       count(DISTINCT worker) FILTER (WHERE state = 'claimed' AND claimed_until >= now()) AS workers,
       count(DISTINCT worker) AS workers_seen
FROM kbctl.run_items WHERE namespace_id = %s AND run_id = %s
