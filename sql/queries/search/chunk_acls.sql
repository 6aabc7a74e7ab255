-- Each chunk's document ACL (chunks inherit their document's), for the access gate.
-- Parameters: namespace ids, chunk ids (in pairs).
SELECT c.namespace_id, c.id, d.acl
FROM kbctl.chunks c
JOIN kbctl.documents d ON d.namespace_id = c.namespace_id AND d.id = c.document_id
WHERE (c.namespace_id, c.id) IN (SELECT * FROM unnest(%s::int[], %s::bigint[]))
