-- Each generation's vector count and bytes on disk: its vectors (as stored in their rows) and its
-- HNSW index. Parameters: namespace id.
SELECT g.id,
       count(v.chunk_id) AS vectors,
       coalesce(sum(coalesce(pg_column_size(v.embedding), 0) + coalesce(pg_column_size(v.half), 0)), 0)::bigint
           AS vector_bytes,
       coalesce(pg_relation_size(to_regclass('kbctl.vectors_hnsw_g' || g.id)), 0) AS index_bytes
FROM kbctl.generations g
LEFT JOIN kbctl.vectors v ON v.namespace_id = g.namespace_id AND v.generation_id = g.id
WHERE g.namespace_id = %s
GROUP BY g.id
ORDER BY g.id
