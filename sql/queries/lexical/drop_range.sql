-- A namespace's segments numbered in (after, before), with their docs and terms (by cascade): the
-- ones a repack replaced, deleted once their replacement is written (segment numbers only grow, so
-- a query that read the old directory finds its blocks gone, never another segment's under the
-- same number). Parameters: namespace id, after, before.
DELETE FROM kbctl.lexical_segments WHERE namespace_id = %s AND segment > %s AND segment < %s
