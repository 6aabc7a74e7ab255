-- Wait for and take a namespace's ingest lock (session level). Parameters: lock class, namespace id.
SELECT pg_advisory_lock(%s, %s)
