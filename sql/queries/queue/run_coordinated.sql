-- Whether a run's coordinator is alive: it holds the run's lock (``runs/lock_run``) in this
-- database, as ``queue/claim`` checks. A running run without one was killed; its workers stop.
-- Parameters: lock class, run id.
SELECT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                 AND l.classid = %s AND l.objid::bigint = mod(%s, 2147483648))
