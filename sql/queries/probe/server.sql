-- What the server offers kbctl's login, read once per connection pool (kbctl.store.capabilities):
-- PostgreSQL's version number, pgvector's version (NULL without the extension), whether the
-- halfvec type exists, and whether the login may create roles (a tenant's role, migration 009).
SELECT current_setting('server_version_num')::int,
       (SELECT extversion FROM pg_extension WHERE extname = 'vector'),
       to_regtype('halfvec') IS NOT NULL,
       (SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = session_user),
       session_user
