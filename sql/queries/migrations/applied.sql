-- Every applied migration: version, checksum, when.
SELECT version, checksum, applied_at FROM kbctl.schema_migrations
