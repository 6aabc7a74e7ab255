-- Sources that failed in the latest run with failures and were not retried since.
-- Parameters: namespace id, namespace id.
SELECT DISTINCT source
FROM kbctl.run_errors
WHERE namespace_id = %s AND NOT retried
  AND run_id = (SELECT max(run_id) FROM kbctl.run_errors WHERE namespace_id = %s)
