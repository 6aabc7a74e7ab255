-- The packed segments of the namespaces with what identifies each (range, chunks, build time) and
-- whether it has a forward index (migration 017). Parameters: namespace ids.
SELECT g.namespace_id, g.segment, g.lo, g.hi, g.chunks, g.built_at,
       EXISTS (SELECT 1 FROM kbctl.lexical_forward f WHERE f.namespace_id = g.namespace_id AND f.segment = g.segment)
FROM kbctl.lexical_segments g
WHERE g.namespace_id = ANY(%s)
ORDER BY g.namespace_id, g.segment
