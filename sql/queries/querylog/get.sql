-- A logged query of a tenant and agent. Parameters: query id, tenant, agent.
SELECT id, namespace_ids, results FROM kbctl.query_log WHERE id = %s AND tenant = %s AND agent = %s
