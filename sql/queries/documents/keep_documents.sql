-- Documents of a changed source found unchanged keep their rows and take the source's new hash,
-- unless their row was written again (a new id) or its ACL changed since it was read. A JSON list
-- of {"id", "source_hash", "acl": [entries] or null, "explicit"}. Returns the URIs kept.
-- Parameters: the list, namespace id.
UPDATE kbctl.documents d
SET source_hash = u.source_hash
FROM jsonb_to_recordset(%s::jsonb) AS u(id bigint, source_hash text, acl jsonb, explicit boolean)
WHERE d.namespace_id = %s AND d.id = u.id
  AND d.acl IS NOT DISTINCT FROM (CASE WHEN jsonb_typeof(u.acl) = 'array' THEN ARRAY(SELECT jsonb_array_elements_text(u.acl)) END)
  AND d.acl_explicit = u.explicit
RETURNING d.uri
