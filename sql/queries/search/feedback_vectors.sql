-- The stored embeddings of the feedback chunks (pseudo-relevance feedback, Rocchio).
-- Parameters: namespace ids, chunk ids (in pairs).
SELECT c.namespace_id, c.id, c.embedding
FROM unnest(%s::int[], %s::bigint[]) AS x(ns, id)
JOIN kbctl.chunks c ON c.namespace_id = x.ns AND c.id = x.id
