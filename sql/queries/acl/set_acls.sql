-- New ACLs for documents: a JSON list of {"id": document id, "acl": [entries] or null}.
-- Parameters: the list, namespace id.
UPDATE kbctl.documents d
SET acl = CASE WHEN jsonb_typeof(u.acl) = 'array' THEN ARRAY(SELECT jsonb_array_elements_text(u.acl)) END,
    updated_at = now()
FROM jsonb_to_recordset(%s::jsonb) AS u(id bigint, acl jsonb)
WHERE d.namespace_id = %s AND d.id = u.id
