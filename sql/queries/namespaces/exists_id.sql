-- Whether a namespace still exists (one row if it does). Parameters: namespace id.
SELECT 1 FROM kbctl.namespaces WHERE id = %s
