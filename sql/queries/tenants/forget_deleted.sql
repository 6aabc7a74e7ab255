-- `kbctl tenants create` makes a deleted tenant again: its name is no longer refused. Parameters: tenant.
DELETE FROM kbctl.deleted_tenants WHERE name = %s
