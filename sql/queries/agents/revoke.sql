-- Revoke every token of an agent. Parameters: tenant, agent.
UPDATE kbctl.agent_tokens SET revoked_at = now() WHERE tenant = %s AND agent = %s AND revoked_at IS NULL
