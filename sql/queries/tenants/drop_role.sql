-- Drop a tenant's role. Template: role.
DROP ROLE IF EXISTS {role}
