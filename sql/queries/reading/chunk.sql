-- One chunk by id among the given namespaces, with its document's uri, title, metadata and ACL.
-- Parameters: chunk id, namespace ids.
SELECT c.id, c.document_id, c.position, c.text, c.heading_path, c.page, c.metadata,
       d.namespace_id, d.uri, d.title, d.source_type, d.metadata, d.acl
FROM kbctl.chunks c
JOIN kbctl.documents d ON d.id = c.document_id AND d.namespace_id = c.namespace_id
WHERE c.id = %s AND c.namespace_id = ANY(%s::int[])
