-- Stored sources take a new source hash without being read again: each given source's documents
-- stored under its previous hash (kbctl.ingest.steps.previous_source_hash) take the current one.
-- Parameters: source URIs, their previous hashes, their hashes (arrays of one length), namespace id.
UPDATE kbctl.documents d SET source_hash = r.new_hash
FROM unnest(%s::text[], %s::text[], %s::text[]) AS r (source_uri, old_hash, new_hash)
WHERE d.namespace_id = %s AND d.source_uri = r.source_uri AND d.source_hash = r.old_hash
