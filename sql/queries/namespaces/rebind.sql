-- Bind a namespace (an empty one) to another profile, at the current analyzer version.
-- Parameters: profile id, dimension, analyzer version, namespace id.
UPDATE kbctl.namespaces SET profile_id = %s, dimension = %s, analyzer = %s, updated_at = now() WHERE id = %s
