-- The namespace's ingest lock, for the rest of the transaction (granted at once to a session that
-- already holds it, as an ingest packing its own tail does). Parameters: lock class, namespace id.
SELECT pg_advisory_xact_lock(%s, %s)
