-- A registered tenant's key for the opaque ids its agents see (migration 018); never shown.
-- Parameters: tenant.
SELECT id_key FROM kbctl.tenants WHERE name = %s
