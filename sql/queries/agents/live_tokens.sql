-- How many valid (not revoked) tokens each agent of the given tenants holds, read as the login
-- (agent_tokens' policy is enabled, not forced). Parameters: tenants (text[]).
SELECT tenant, agent, count(*) FROM kbctl.agent_tokens
WHERE tenant = ANY(%s) AND revoked_at IS NULL
GROUP BY tenant, agent
