-- Release a namespace's ingest lock. Parameters: lock class, namespace id.
SELECT pg_advisory_unlock(%s, %s)
