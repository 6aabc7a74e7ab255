-- A new bearer token of an agent (its sha256 only), linked to the tenant's registration it is made
-- for (migration 021); no row when the tenant is not registered (to the calling role).
-- Parameters: tenant, agent, token hash, tenant.
INSERT INTO kbctl.agent_tokens (tenant, agent, token_hash, tenant_instance)
SELECT %s, %s, %s, t.instance FROM kbctl.tenants t WHERE t.name = %s
RETURNING id
