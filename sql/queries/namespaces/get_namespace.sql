-- A namespace with the pin of its profile. Parameters: tenant, name.
SELECT n.id, n.tenant, n.name, n.profile_id, p.name, p.fingerprint, p.model, n.dimension, p.distance,
       n.description
FROM kbctl.namespaces n
JOIN kbctl.profiles p ON p.id = n.profile_id
WHERE n.tenant = %s AND n.name = %s
