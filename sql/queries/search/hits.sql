-- What a hit shows: each chunk with its document and namespace, and the document's ACL (chunks
-- inherit it) for the access gate.
-- Parameters: namespace ids, chunk ids (in pairs).
SELECT c.namespace_id, c.id, c.document_id, c.text, c.metadata, c.heading_path, c.page, c.position,
       d.uri, d.title, n.name, d.acl
FROM kbctl.chunks c
JOIN kbctl.documents d ON d.namespace_id = c.namespace_id AND d.id = c.document_id
JOIN kbctl.namespaces n ON n.id = c.namespace_id
WHERE (c.namespace_id, c.id) IN (SELECT * FROM unnest(%s::int[], %s::bigint[]))
