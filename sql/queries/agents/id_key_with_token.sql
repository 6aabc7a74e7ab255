-- A registered tenant's key for its opaque ids (as tenants/id_key) and whether a bearer token of that
-- tenant is valid now (not revoked, not gone with a delete), in one statement: a server reads the key
-- at every borrow of a token's request anyway, so a revoked token is refused on its next request at
-- no extra round trip. Run as the tenant's role: it reads its own registry row and its own tokens
-- only (policies own_row and tenant_rows, migration 009), which it may read anyway. A token made
-- for another registration of the tenant's name (migration 021) is not valid.
-- Parameters: token hash, tenant.
SELECT t.id_key, EXISTS (
    SELECT 1 FROM kbctl.agent_tokens a
    WHERE a.token_hash = %s AND a.tenant = t.name AND a.tenant_instance = t.instance AND a.revoked_at IS NULL
)
FROM kbctl.tenants t
WHERE t.name = %s
