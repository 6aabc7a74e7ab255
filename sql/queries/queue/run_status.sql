-- A run's status and namespace name. Parameters: run id.
SELECT r.namespace_id, n.name, r.status FROM kbctl.runs r JOIN kbctl.namespaces n ON n.id = r.namespace_id WHERE r.id = %s
