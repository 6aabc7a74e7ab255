-- The server's PostgreSQL version.
SELECT current_setting('server_version')
