-- A tenant's namespace ids. Parameters: tenant.
SELECT id FROM kbctl.namespaces WHERE tenant = %s
