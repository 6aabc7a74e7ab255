-- kbctl's tables, but the migration ledger.
SELECT c.relname
FROM pg_class c
WHERE c.relnamespace = 'kbctl'::regnamespace AND c.relkind = 'r' AND c.relname <> 'schema_migrations'
ORDER BY c.relname
