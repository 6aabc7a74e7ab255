-- The checksum a migration was applied with. Parameters: version.
SELECT checksum FROM kbctl.schema_migrations WHERE version = %s
