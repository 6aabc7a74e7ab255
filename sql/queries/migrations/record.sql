-- Record an applied migration. Parameters: version, name, checksum.
INSERT INTO kbctl.schema_migrations (version, name, checksum) VALUES (%s, %s, %s)
