-- The ACLs of the documents holding a term (the first postings found, at most the limit given):
-- the spelling corrector offers a term only when the access gate lets one of them through.
-- Parameters: namespace ids, term, limit.
SELECT p.namespace_id, d.acl
FROM (
    SELECT namespace_id, chunk_id
    FROM kbctl.lexical_postings
    WHERE namespace_id = ANY(%s) AND term = %s
    LIMIT %s
) p
JOIN kbctl.chunks c ON c.namespace_id = p.namespace_id AND c.id = p.chunk_id
JOIN kbctl.documents d ON d.namespace_id = c.namespace_id AND d.id = c.document_id
