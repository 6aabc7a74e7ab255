-- The tenant and agent a bearer token belongs to (not revoked), through the definer's lookup that
-- sees every tenant's tokens (migration 009), with the key of that tenant's opaque ids (migration
-- 018), made anew when the tenant is made again under its name: who the token was made for. A token
-- of a tenant not registered finds nothing. Run as the login (the registry is not forced).
-- Parameters: token hash.
SELECT a.tenant, a.agent, t.id_key
FROM kbctl.agent_of_token(%s) a
JOIN kbctl.tenants t ON t.name = a.tenant
