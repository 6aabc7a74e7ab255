-- A new segment row (its blocks follow in the same transaction). Parameters: namespace id, lo, hi,
-- namespace id. Returns the segment number.
INSERT INTO kbctl.lexical_segments (namespace_id, segment, lo, hi, chunks, postings)
SELECT %s, coalesce(max(segment), 0) + 1, %s, %s, 0, 0
FROM kbctl.lexical_segments WHERE namespace_id = %s
RETURNING segment
