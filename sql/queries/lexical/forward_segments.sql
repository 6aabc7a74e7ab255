-- The packed segments of the namespaces with what identifies each (range, chunks, build time) and
-- the size of its forward index (the term ids' bytes, read from the value's TOAST pointer, not the
-- value), NULL when it has none (packed before migration 017). Parameters: namespace ids.
SELECT g.namespace_id, g.segment, g.lo, g.hi, g.chunks, g.built_at,
       (SELECT octet_length(f.term_ids) FROM kbctl.lexical_forward f
        WHERE f.namespace_id = g.namespace_id AND f.segment = g.segment)
FROM kbctl.lexical_segments g
WHERE g.namespace_id = ANY(%s)
ORDER BY g.namespace_id, g.segment
