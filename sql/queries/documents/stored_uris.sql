-- Every stored document URI of a namespace with its source URI. Parameters: namespace id.
SELECT uri, source_uri FROM kbctl.documents WHERE namespace_id = %s
