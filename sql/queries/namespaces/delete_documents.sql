-- Every document of a namespace (their cascade removes chunks and postings). Parameters: namespace id.
DELETE FROM kbctl.documents WHERE namespace_id = %s
