-- Bind a namespace to another profile. Parameters: profile id, dimension, namespace id.
UPDATE kbctl.namespaces SET profile_id = %s, dimension = %s, updated_at = now() WHERE id = %s
