-- The terms of these documents' chunks, and in how many of the chunks each is (what they add to the
-- vocabulary's document frequencies). Parameters: namespace id, document ids, namespace id.
-- The chunk ids are found first, so the postings are read through (namespace_id, chunk_id) whatever
-- the planner estimates for the namespace.
SELECT p.term, count(*)::int
FROM kbctl.lexical_postings p
WHERE p.namespace_id = %s
  AND p.chunk_id = ANY(ARRAY(SELECT c.id FROM kbctl.chunks c WHERE c.namespace_id = %s AND c.document_id = ANY(%s)))
GROUP BY p.term
