-- When a tenant was deleted, if it was and has not been made again since. Parameters: tenant.
SELECT deleted_at FROM kbctl.deleted_tenants WHERE name = %s
