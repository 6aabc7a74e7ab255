-- Release a run's lock (``lock_run``). Parameters: lock class, run id.
SELECT pg_advisory_unlock(%s, kbctl.run_lock_key(%s))
