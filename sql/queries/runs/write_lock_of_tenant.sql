-- A document writer's locks, for the rest of the transaction: its tenant's lock, shared (the
-- tenant's delete takes it exclusively: tenants/lock), then the namespace's write lock
-- (runs/write_lock), in that order. Parameters: tenant, lock class, namespace id.
SELECT pg_advisory_xact_lock_shared(hashtextextended('kbctl.tenant:' || %s, 0)), pg_advisory_xact_lock(%s, %s)
