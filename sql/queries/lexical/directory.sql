-- The block directories of the query terms in the namespaces' segments.
-- Parameters: namespace ids, terms.
SELECT namespace_id, term, segment, sizes, max_tfs, min_dls
FROM kbctl.lexical_terms
WHERE namespace_id = ANY(%s) AND term = ANY(%s)
