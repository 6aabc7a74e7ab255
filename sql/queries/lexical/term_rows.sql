-- A segment's rows of the given terms (the arrays of a plan that returned them NULL, when the
-- caller's copy was of another segment). Parameters: namespace id, segment, terms.
SELECT term, ords, tfs FROM kbctl.lexical_terms WHERE namespace_id = %s AND segment = %s AND term = ANY(%s)
