-- A tenant's namespace names, sorted. Parameters: tenant.
SELECT name FROM kbctl.namespaces WHERE tenant = %s ORDER BY name
