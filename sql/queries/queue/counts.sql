-- The counts the workers' batches recorded for a run. Parameters: namespace id, run id.
SELECT counts FROM kbctl.run_items WHERE namespace_id = %s AND run_id = %s AND counts IS NOT NULL
