-- Mark the failures of these sources retried. Parameters: namespace id, source URIs.
UPDATE kbctl.run_errors SET retried = true WHERE namespace_id = %s AND source = ANY(%s)
