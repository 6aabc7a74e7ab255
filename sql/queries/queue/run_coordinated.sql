-- Whether a run's coordinator is alive: it holds the run's lock (``runs/lock_run``) in this
-- database, as ``queue/claim`` checks. A running run without one was killed; its workers stop.
-- Parameters: lock class, run id.
SELECT kbctl.run_coordinated(%s, %s)
