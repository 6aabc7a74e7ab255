-- A kbctl table's B-tree indexes. Parameters: table name.
SELECT i.relname
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_am a ON a.oid = i.relam
WHERE x.indrelid = format('kbctl.%%I', %s::text)::regclass AND a.amname = 'btree'
ORDER BY 1
