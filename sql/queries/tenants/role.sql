-- A tenant's role, if it is registered. Parameters: tenant.
SELECT role FROM kbctl.tenants WHERE name = %s
