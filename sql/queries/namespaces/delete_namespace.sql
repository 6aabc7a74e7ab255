-- The namespace row. Parameters: namespace id.
DELETE FROM kbctl.namespaces WHERE id = %s
