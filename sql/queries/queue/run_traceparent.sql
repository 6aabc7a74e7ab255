-- The trace a run's workers join: the traceparent its coordinator stored with it, or NULL. Parameters: run id.
SELECT options->>'traceparent' FROM kbctl.runs WHERE id = %s
