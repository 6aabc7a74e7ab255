-- A deleted tenant stays deleted: `kbctl tenants delete` records the name here, in the transaction
-- that unregisters the tenant and drops its role.
--
-- Embedded, a tenant is made on its name's first use (nothing to set up). Without this record a
-- deleted tenant's name was such a first use again: the next command, worker or server request
-- naming it made the tenant anew, with a new role and an empty store, where it should be refused.
-- A name recorded here is refused (kbctl.errors.TenantNotFound) until `kbctl tenants create` makes
-- the tenant again, which removes the record.
--
-- The owner's alone, like the registry's other rows: no tenant's role is granted it, and row-level
-- security (enabled, no policy) refuses every row to any other role that could reach it.
CREATE TABLE kbctl.deleted_tenants (
    name       text        PRIMARY KEY,
    deleted_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE kbctl.deleted_tenants ENABLE ROW LEVEL SECURITY;
