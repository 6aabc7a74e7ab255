-- The documents whose ACL comes from the namespace's configuration (path rules, e-mail recipients),
-- parents before children, with what the rules read. All of them when the configuration derives
-- ACLs, else only those still holding a derived ACL (to clear it).
-- Parameters: namespace id, whether the configuration derives ACLs.
SELECT id, uri, parent_uri, source_type,
       jsonb_build_object('path', metadata -> 'path', 'from', metadata -> 'from', 'to', metadata -> 'to',
                          'cc', metadata -> 'cc'),
       acl
FROM kbctl.documents
WHERE namespace_id = %s AND NOT acl_explicit AND (%s OR acl IS NOT NULL)
ORDER BY parent_uri IS NOT NULL, id
