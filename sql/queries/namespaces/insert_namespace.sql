-- Create a namespace unless it exists; its id when created.
-- Parameters: tenant, name, profile id, dimension, description.
INSERT INTO kbctl.namespaces (tenant, name, profile_id, dimension, description)
VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (tenant, name) DO NOTHING
RETURNING id
