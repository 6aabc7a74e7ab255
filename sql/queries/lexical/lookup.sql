-- The postings of (term, chunk) pairs, from the postings key (index-only): what completes a
-- candidate's score. The pairs come as comma-separated lists: namespace ids, chunk ids, indexes
-- into the terms; then the terms.
SELECT p.chunk_id, p.term, p.tf, p.dl
FROM unnest(string_to_array(%s, ',')::int[], string_to_array(%s, ',')::bigint[],
            string_to_array(%s, ',')::int[]) AS k(namespace_id, chunk_id, t)
JOIN kbctl.lexical_postings p
  ON p.namespace_id = k.namespace_id AND p.term = (%s::text[])[k.t] AND p.chunk_id = k.chunk_id
