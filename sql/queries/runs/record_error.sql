-- One failed item of a run. Parameters: namespace id, run id, stage, source, error class, message.
INSERT INTO kbctl.run_errors (namespace_id, run_id, stage, source, error_class, message)
VALUES (%s, %s, %s, %s, %s, %s)
