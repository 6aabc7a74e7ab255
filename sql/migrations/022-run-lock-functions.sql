-- A run's lock, named in one place.
--
-- A run's coordinator holds a session-level advisory lock on the run while the run is open
-- (``runs/lock_run``): workers claim items only while it is held, and the run lists tell a live run
-- from a killed one by it. Nine queries read or take that lock, and each spelled out how a run id
-- folds into the lock's integer key and how pg_locks shows a lock held in this database. These
-- functions are that one spelling; the queries call them.

-- The lock's second key of a run: its id folded into an integer.
CREATE FUNCTION kbctl.run_lock_key(run_id bigint) RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT mod(run_id, 2147483648)::integer $$;

-- The keys of the run locks of a lock class held now in this database, by any session.
CREATE FUNCTION kbctl.held_run_keys(lock_class integer) RETURNS SETOF integer LANGUAGE sql STABLE
AS $$
    SELECT l.objid::integer FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.classid = lock_class::oid
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
$$;

-- Whether a run's lock is held now in this database (its coordinator is alive).
CREATE FUNCTION kbctl.run_coordinated(lock_class integer, run_id bigint) RETURNS boolean LANGUAGE sql STABLE
AS $$ SELECT EXISTS (SELECT 1 FROM kbctl.held_run_keys(lock_class) k WHERE k = kbctl.run_lock_key(run_id)) $$;
