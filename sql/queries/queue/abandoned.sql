-- Items no worker could store (their lease expired as often as allowed) become failed; returns their
-- targets. Parameters: namespace id, run id, most attempts.
UPDATE kbctl.run_items SET state = 'failed', claimed_until = NULL
WHERE namespace_id = %s AND run_id = %s AND state = 'claimed' AND claimed_until < now() AND attempts >= %s
RETURNING target, attempts
