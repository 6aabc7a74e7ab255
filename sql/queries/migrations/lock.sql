-- Serialize migrations across processes until the transaction ends. Parameters: the lock key.
SELECT pg_advisory_xact_lock(%s)
