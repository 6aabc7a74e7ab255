-- What the lexical lane needs of the packed namespaces among the given ones, in one statement (one
-- snapshot): per namespace its highest packed chunk id, the chunks its segments were packed with,
-- the chunks above that id now (the unpacked tail, counted up to a limit) and the chunks it holds
-- now (packed + tail - now = packed chunks deleted since); and, on the same row, each query term's
-- ordinals and tfs in each segment, its largest tf and smallest dl, with what identifies the segment (its range, chunks and build
-- time: the key of its chunk ids and lengths kept in memory) (NULL term: no query term is packed there).
-- Parameters: namespace ids, limit, the terms whose arrays the caller holds (NULL arrays), the same, terms.
WITH w AS (
    SELECT namespace_id, max(hi) AS hi, sum(chunks)::bigint AS chunks
    FROM kbctl.lexical_segments
    WHERE namespace_id = ANY(%s)
    GROUP BY namespace_id
), s AS (
    SELECT w.namespace_id, w.hi, w.chunks,
           (SELECT count(*) FROM (SELECT 1 FROM kbctl.chunks c
                                  WHERE c.namespace_id = w.namespace_id AND c.id > w.hi LIMIT %s) t) AS tail,
           coalesce(st.chunk_count, 0)::bigint AS now
    FROM w LEFT JOIN kbctl.lexical_stats st ON st.namespace_id = w.namespace_id
)
SELECT s.namespace_id, s.hi, s.chunks, s.tail, s.now, t.term, t.segment,
       CASE WHEN t.term = ANY(%s) THEN NULL ELSE t.ords END, CASE WHEN t.term = ANY(%s) THEN NULL ELSE t.tfs END,
       t.max_tf, t.min_dl,
       g.lo, g.hi, g.chunks, g.built_at
FROM s LEFT JOIN kbctl.lexical_terms t ON t.namespace_id = s.namespace_id AND t.term = ANY(%s)
       LEFT JOIN kbctl.lexical_segments g ON g.namespace_id = t.namespace_id AND g.segment = t.segment
