-- A tenant's lock, shared, to the end of the transaction: taken by whoever makes a namespace of the
-- tenant, so its delete (which takes tenants/lock, exclusively) is wholly before or after it.
-- Parameters: tenant.
SELECT pg_advisory_xact_lock_shared(hashtextextended('kbctl.tenant:' || %s, 0))
