-- Sources that failed in the latest run with failures and were not retried since (warnings are
-- not failures: their error class ends in "Warning"). Parameters: namespace id, namespace id.
SELECT DISTINCT source
FROM kbctl.run_errors
WHERE namespace_id = %s AND NOT retried AND error_class NOT LIKE '%%Warning'
  AND run_id = (SELECT max(run_id) FROM kbctl.run_errors WHERE namespace_id = %s AND error_class NOT LIKE '%%Warning')
