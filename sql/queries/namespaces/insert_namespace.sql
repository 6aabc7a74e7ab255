-- Create a namespace unless it exists; its id when created.
-- Parameters: tenant, name, profile id, dimension, description, analyzer version.
INSERT INTO kbctl.namespaces (tenant, name, profile_id, dimension, description, analyzer)
VALUES (%s, %s, %s, %s, %s, %s)
ON CONFLICT (tenant, name) DO NOTHING
RETURNING id
