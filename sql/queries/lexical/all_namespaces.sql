-- Every namespace's id, name and tenant (the owner's view: all tenants). No parameters.
SELECT id, name, tenant FROM kbctl.namespaces ORDER BY id
