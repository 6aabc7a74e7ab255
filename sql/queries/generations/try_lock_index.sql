-- Take a generation's index-build lock (session level, until unlock_index) if it is free; true
-- when taken. Tried, not waited for: a session waiting in a statement would hold a snapshot that
-- the build it waits for (CREATE INDEX CONCURRENTLY) in turn waits out, a deadlock.
-- Parameters: the lock class (generations.INDEX_CLASS), generation id.
SELECT pg_try_advisory_lock(%s, %s)
