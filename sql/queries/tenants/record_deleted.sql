-- Record a deleted tenant's name, so no later use of it makes the tenant again (migration 020).
-- Parameters: tenant.
INSERT INTO kbctl.deleted_tenants (name) VALUES (%s)
ON CONFLICT (name) DO UPDATE SET deleted_at = now()
