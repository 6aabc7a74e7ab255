-- Take a run's lock (session level), held by its coordinator while the run is open: its workers
-- claim items only while it is held, so a run whose coordinator is gone gets no more writes
-- (whoever holds the namespace's ingest lock meanwhile). A run id is folded into the lock's
-- second key (an integer). Parameters: lock class, run id.
SELECT pg_advisory_lock(%s, kbctl.run_lock_key(%s))
