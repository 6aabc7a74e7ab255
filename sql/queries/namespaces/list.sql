-- The namespaces (of one tenant, or every one) with their profile, document and chunk counts and
-- generations (vectors and bytes on disk: vectors and HNSW index), and the analyzer version of its postings.
-- Parameters: tenant (NULL: all), tenant.
SELECT n.tenant, n.name, p.name AS profile, p.model, n.dimension, p.fingerprint, n.analyzer,
       (SELECT count(*) FROM kbctl.documents d WHERE d.namespace_id = n.id) AS documents,
       (SELECT count(*) FROM kbctl.chunks c WHERE c.namespace_id = n.id) AS chunks,
       (SELECT coalesce(json_agg(json_build_object(
                   'id', g.id, 'state', g.state, 'profile', gp.name, 'model', gp.model, 'dimension', g.dimension,
                   'storage', g.storage,
                   'vectors', (SELECT count(*) FROM kbctl.vectors v
                               WHERE v.namespace_id = g.namespace_id AND v.generation_id = g.id),
                   'bytes', (SELECT coalesce(sum(coalesce(pg_column_size(v.embedding), 0)
                                                 + coalesce(pg_column_size(v.half), 0)), 0)
                             FROM kbctl.vectors v WHERE v.namespace_id = g.namespace_id AND v.generation_id = g.id)
                            + coalesce(pg_relation_size(to_regclass('kbctl.vectors_hnsw_g' || g.id)), 0))
                   ORDER BY g.id), '[]')
        FROM kbctl.generations g JOIN kbctl.profiles gp ON gp.id = g.profile_id
        WHERE g.namespace_id = n.id) AS generations,
       n.created_at
FROM kbctl.namespaces n
JOIN kbctl.profiles p ON p.id = n.profile_id
WHERE %s::text IS NULL OR n.tenant = %s
ORDER BY n.tenant, n.name
