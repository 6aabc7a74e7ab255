-- A kbctl table's size with its indexes and TOAST, in bytes. Parameters: table name.
SELECT pg_total_relation_size(format('kbctl.%%I', %s::text)::regclass)
