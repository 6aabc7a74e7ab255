-- A tenant's namespaces with their profile and document and chunk counts. Parameters: tenant.
SELECT n.tenant, n.name, p.name AS profile, p.model, n.dimension, p.fingerprint,
       (SELECT count(*) FROM kbctl.documents d WHERE d.namespace_id = n.id) AS documents,
       (SELECT count(*) FROM kbctl.chunks c WHERE c.namespace_id = n.id) AS chunks,
       n.created_at
FROM kbctl.namespaces n
JOIN kbctl.profiles p ON p.id = n.profile_id
WHERE n.tenant = %s
ORDER BY n.tenant, n.name
