-- The namespace's own pin follows its active generation. Parameters: profile id, dimension, namespace id.
UPDATE kbctl.namespaces SET profile_id = %s, dimension = %s, updated_at = now() WHERE id = %s
