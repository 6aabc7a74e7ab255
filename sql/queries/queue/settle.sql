-- A worker's claimed items are done or failed; the batch's counts go on its first item. Parameters:
-- first item, counts (JSON), namespace id, run id, worker, items, failed items.
UPDATE kbctl.run_items
SET state = CASE WHEN item = ANY(%(failed)s) THEN 'failed' ELSE 'done' END, claimed_until = NULL,
    counts = CASE WHEN item = %(first)s THEN %(counts)s::jsonb END
WHERE namespace_id = %(ns)s AND run_id = %(run)s AND worker = %(worker)s AND state = 'claimed' AND item = ANY(%(items)s)
RETURNING item
