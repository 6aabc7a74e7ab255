-- Unregister a tenant (its rows are deleted first, as its role). Parameters: tenant.
DELETE FROM kbctl.tenants WHERE name = %s
