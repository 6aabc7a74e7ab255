-- The tenant and agent a bearer token belongs to (not revoked), through the definer's lookup that
-- sees every tenant's tokens (migration 009). Parameters: token hash.
SELECT tenant, agent FROM kbctl.agent_of_token(%s)
