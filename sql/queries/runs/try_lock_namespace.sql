-- Take a namespace's ingest lock if free; true when taken. Parameters: lock class, namespace id.
SELECT pg_try_advisory_lock(%s, %s)
