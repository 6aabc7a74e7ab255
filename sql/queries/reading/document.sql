-- One document by id among the given namespaces, with its ACL (for the access gate).
-- Parameters: document id, namespace ids.
SELECT d.namespace_id, n.name, d.id, d.uri, d.title, d.source_type, d.metadata, d.chunk_count, d.char_count, d.acl
FROM kbctl.documents d
JOIN kbctl.namespaces n ON n.id = d.namespace_id
WHERE d.id = %s AND d.namespace_id = ANY(%s::int[])
