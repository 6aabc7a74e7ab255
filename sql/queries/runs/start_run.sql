-- Open a run row. Parameters: namespace id, command, options (JSON).
INSERT INTO kbctl.runs (namespace_id, command, options) VALUES (%s, %s, %s) RETURNING id
