-- Delete the current tenant's rows that no namespace holds (audit, agent tokens, query log).
-- Parameters: tenant, tenant, tenant.
WITH a AS (DELETE FROM kbctl.search_audit WHERE tenant = %s),
     t AS (DELETE FROM kbctl.agent_tokens WHERE tenant = %s)
DELETE FROM kbctl.query_log WHERE tenant = %s
