-- How many entries of kbctl.metadata_values one equality filter looks up in the namespaces, counted
-- up to a cap (an index-only scan of metadata_values_pkey).
-- Parameters: namespace ids, the key, the texts, the numbers (kbctl.store.filters.lookup_of), the cap.
SELECT count(*)
FROM (
    SELECT 1 FROM kbctl.metadata_values mv
    WHERE mv.namespace_id = ANY(%s) AND mv.key = left(%s, 200)
      AND mv.value = ANY(kbctl.metadata_lookup(%s::text[], %s::text[]))
    LIMIT %s
) x
