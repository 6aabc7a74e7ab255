-- A worker's claimed items are done or failed (those it still holds: an item taken over by another
-- worker is that worker's to settle). Parameters: failed items, namespace id, run id, worker, items.
UPDATE kbctl.run_items
SET state = CASE WHEN item = ANY(%s) THEN 'failed' ELSE 'done' END, claimed_until = NULL
WHERE namespace_id = %s AND run_id = %s AND worker = %s AND state = 'claimed' AND item = ANY(%s)
RETURNING item
