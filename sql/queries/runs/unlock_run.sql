-- Release a run's lock (``lock_run``). Parameters: lock class, run id.
SELECT pg_advisory_unlock(%s, mod(%s, 2147483648)::integer)
