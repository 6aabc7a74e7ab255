-- The document id of each (namespace id, chunk id).
-- Parameters: namespace ids, chunk ids (in pairs).
SELECT c.namespace_id, c.id, c.document_id
FROM unnest(%s::int[], %s::bigint[]) AS x(ns, id)
JOIN kbctl.chunks c ON c.namespace_id = x.ns AND c.id = x.id
