-- A worker stopping hands its claimed items back at once. Parameters: namespace id, run id, worker, items.
UPDATE kbctl.run_items SET state = 'queued', claimed_until = NULL, attempts = greatest(attempts - 1, 0)
WHERE namespace_id = %s AND run_id = %s AND worker = %s AND state = 'claimed' AND item = ANY(%s)
