-- The stored embeddings of the feedback chunks (pseudo-relevance feedback, Rocchio), in the
-- generations the search reads. Parameters: namespace ids, chunk ids (in pairs), generation ids.
SELECT v.namespace_id, v.chunk_id, coalesce(v.embedding, v.half::vector)
FROM unnest(%s::int[], %s::bigint[]) AS x(ns, id)
JOIN kbctl.vectors v ON v.namespace_id = x.ns AND v.chunk_id = x.id AND v.generation_id = ANY(%s)
