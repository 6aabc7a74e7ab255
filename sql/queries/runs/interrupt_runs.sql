-- Runs a killed process left running are interrupted. Parameters: namespace id.
UPDATE kbctl.runs SET status = 'interrupted', finished_at = now() WHERE namespace_id = %s AND status = 'running'
