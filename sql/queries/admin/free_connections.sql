-- The connections an ordinary role can still open on this server, and the server's limit:
-- max_connections less the reserved ones (superuser_reserved_connections, and reserved_connections
-- where the server has it, PostgreSQL 16+) and the client sessions open now. No parameters.
SELECT current_setting('max_connections')::int
         - current_setting('superuser_reserved_connections')::int
         - coalesce(nullif(current_setting('reserved_connections', true), '')::int, 0)
         - (SELECT count(*)::int FROM pg_stat_activity
            WHERE backend_type IS NULL OR backend_type = 'client backend'),
       current_setting('max_connections')::int
