-- A namespace's name. Parameters: namespace id.
SELECT name FROM kbctl.namespaces WHERE id = %s
