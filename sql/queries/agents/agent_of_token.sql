-- The tenant and agent a bearer token belongs to (not revoked). Parameters: token hash.
SELECT tenant, agent FROM kbctl.agent_tokens WHERE token_hash = %s AND revoked_at IS NULL
