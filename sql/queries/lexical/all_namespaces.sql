-- Every namespace's id and name (the owner's view: all tenants). No parameters.
SELECT id, name FROM kbctl.namespaces ORDER BY id
