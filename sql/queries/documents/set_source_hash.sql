-- The documents of a source written in parts, marked whole: the provisional source hash they were
-- stored under becomes the source's hash. Parameters: new hash, namespace id, source URI, provisional hash.
UPDATE kbctl.documents SET source_hash = %s WHERE namespace_id = %s AND source_uri = %s AND source_hash = %s
