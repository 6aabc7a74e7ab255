-- Extend a worker's leases on its claimed items; returns the items it still holds.
-- Parameters: lease seconds, namespace id, run id, worker, items.
UPDATE kbctl.run_items SET claimed_until = now() + make_interval(secs => %s)
WHERE namespace_id = %s AND run_id = %s AND worker = %s AND state = 'claimed' AND item = ANY(%s)
RETURNING item
