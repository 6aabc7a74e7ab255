-- One logged query. Parameters: tenant, agent, tool, namespace ids, query text, results (JSON).
INSERT INTO kbctl.query_log (tenant, agent, tool, namespace_ids, query, results)
VALUES (%s, %s, %s, %s, %s, %s) RETURNING id
