-- The latest audited searches of a tenant.
-- Parameters: tenant, limit.
SELECT id, at, tenant, namespace_ids, principal, groups, query_hash, strategy, returned, withheld
FROM kbctl.search_audit WHERE tenant = %s ORDER BY at DESC, id DESC LIMIT %s
