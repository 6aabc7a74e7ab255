-- Register a tenant and create its role (needs CREATEROLE). Parameters: tenant. Returns the role.
SELECT kbctl.create_tenant(%s)
