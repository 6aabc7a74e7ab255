-- Close a run row. Parameters: status, counts (JSON), namespace id, run id.
UPDATE kbctl.runs SET status = %s, counts = %s, finished_at = now() WHERE namespace_id = %s AND id = %s
