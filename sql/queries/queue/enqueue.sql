-- Items of a run, numbered from a first position. Parameters: namespace id, run id, first position,
-- targets, their paths in their folder (NULL for a URL).
INSERT INTO kbctl.run_items (namespace_id, run_id, item, target, rel)
SELECT %s, %s, %s + o::integer - 1, t, r FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY AS x(t, r, o)
