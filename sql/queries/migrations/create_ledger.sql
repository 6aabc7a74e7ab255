-- The migration ledger: one row per applied migration, with the checksum of its file.
CREATE TABLE IF NOT EXISTS kbctl.schema_migrations (
    version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now())
