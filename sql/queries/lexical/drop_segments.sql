-- A namespace's packed segments after its first N (0: every one), with their docs and terms (by
-- cascade). Parameters: namespace id, N.
DELETE FROM kbctl.lexical_segments
WHERE namespace_id = %s
  AND segment NOT IN (SELECT segment FROM kbctl.lexical_segments WHERE namespace_id = %s ORDER BY segment LIMIT %s)
