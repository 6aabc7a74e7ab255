-- What a hit shows: each chunk with its document and namespace, and the document's ACL (chunks
-- inherit it) for the access gate. Its metadata is the chunk's with its document's fetch facts
-- (the keys given, kbctl.types.FETCH_FACTS), which live on the document's row only (migration 023).
-- Parameters: the fact keys, namespace ids, chunk ids (in pairs).
SELECT c.namespace_id, c.id, c.document_id, c.text,
       c.metadata || coalesce((SELECT jsonb_object_agg(f.key, f.value) FROM jsonb_each(d.metadata) f
                               WHERE f.key = ANY(%s::text[])), '{}'),
       c.heading_path, c.page, c.position, d.uri, d.title, n.name, d.acl
FROM kbctl.chunks c
JOIN kbctl.documents d ON d.namespace_id = c.namespace_id AND d.id = c.document_id
JOIN kbctl.namespaces n ON n.id = c.namespace_id
WHERE (c.namespace_id, c.id) IN (SELECT * FROM unnest(%s::int[], %s::bigint[]))
