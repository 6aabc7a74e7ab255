-- The registered tenants (every one to the registry's owner; its own to a tenant's role).
SELECT name, role, created_at FROM kbctl.tenants ORDER BY name
