-- Release a generation's index-build lock. Parameters: the lock class (generations.INDEX_CLASS),
-- generation id.
SELECT pg_advisory_unlock(%s, %s)
