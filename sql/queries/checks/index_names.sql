-- The names of kbctl's indexes.
SELECT indexname FROM pg_indexes WHERE schemaname = 'kbctl'
