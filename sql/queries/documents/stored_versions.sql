-- The stored versions of documents and of their children, with what decides whether a document of
-- a changed source is written again (its id, content hash, source, parent, type and ACL).
-- Parameters: namespace id, document URIs, document URIs.
SELECT id, uri, content_hash, source_uri, parent_uri, source_type, acl, acl_explicit
FROM kbctl.documents
WHERE namespace_id = %s AND (uri = ANY(%s) OR parent_uri = ANY(%s))
