-- The stored BM25 postings of the feedback chunks (pseudo-relevance feedback, RM3): each chunk's
-- terms with their frequency and the chunk's length, read through the (namespace_id, chunk_id) index.
-- Parameters: namespace ids, chunk ids (in pairs).
SELECT p.namespace_id, p.chunk_id, p.term, p.tf, p.dl
FROM unnest(%s::int[], %s::bigint[]) AS x(ns, id)
JOIN kbctl.lexical_postings p ON p.namespace_id = x.ns AND p.chunk_id = x.id
