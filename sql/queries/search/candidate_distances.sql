-- The distance from a query vector to each of the given chunks' stored vectors, in the generations
-- the search reads (pseudo-relevance feedback rescoring the first round's candidates), read through
-- the primary key. Template: op the distance operator, typ vector or halfvec, d the dimension.
-- Parameters: the query vector, namespace ids, chunk ids, generation ids.
SELECT v.namespace_id, v.chunk_id, coalesce(v.embedding::vector, v.half::vector) {op} %s::vector AS dist
FROM kbctl.vectors v
WHERE v.namespace_id = ANY(%s) AND v.chunk_id = ANY(%s) AND v.generation_id = ANY(%s)
