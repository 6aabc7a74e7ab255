-- A worker's claimed items are done or failed; the batch's counts go on its first item. Parameters:
-- failed items, first item, counts (JSON), namespace id, run id, worker, items.
UPDATE kbctl.run_items
SET state = CASE WHEN item = ANY(%s) THEN 'failed' ELSE 'done' END, claimed_until = NULL,
    counts = CASE WHEN item = %s THEN %s::jsonb END
WHERE namespace_id = %s AND run_id = %s AND worker = %s AND state = 'claimed' AND item = ANY(%s)
RETURNING item
