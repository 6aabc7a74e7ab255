-- Child documents (attachments) whose parent document is gone. Parameters: namespace id.
SELECT count(*)
FROM kbctl.documents d
WHERE d.namespace_id = %s AND d.parent_uri IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM kbctl.documents p WHERE p.namespace_id = d.namespace_id AND p.uri = d.parent_uri)
