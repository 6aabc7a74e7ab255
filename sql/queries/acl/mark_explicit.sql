-- The documents whose ACL came with the document itself (front matter, a record's field): the
-- configuration's rules are not re-applied to them.
-- Parameters: namespace id, document URIs.
UPDATE kbctl.documents SET acl_explicit = true
WHERE namespace_id = %s AND uri = ANY(%s::text[]) AND NOT acl_explicit
