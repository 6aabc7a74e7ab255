-- Whether the migration ledger exists (NULL before the first migration).
SELECT to_regclass('kbctl.schema_migrations')
