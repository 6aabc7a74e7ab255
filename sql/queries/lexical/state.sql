-- What the lexical lane needs to know of each packed namespace: its highest packed chunk id, the
-- chunks its segments were packed with, how many chunks lie above that id now (the unpacked tail,
-- counted up to a limit), and how many chunks it holds now. Packed + tail - now = the packed chunks
-- deleted since (0: no candidate needs checking). Parameters: namespace ids, limit.
WITH w AS (
    SELECT namespace_id, max(hi) AS hi, sum(chunks)::bigint AS chunks
    FROM kbctl.lexical_segments
    WHERE namespace_id = ANY(%s)
    GROUP BY namespace_id
)
SELECT w.namespace_id, w.hi, w.chunks,
       (SELECT count(*) FROM (SELECT 1 FROM kbctl.chunks c
                              WHERE c.namespace_id = w.namespace_id AND c.id > w.hi LIMIT %s) t),
       coalesce(st.chunk_count, 0)
FROM w LEFT JOIN kbctl.lexical_stats st ON st.namespace_id = w.namespace_id
