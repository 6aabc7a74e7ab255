-- A document's chunks in order, from position lo to hi (inclusive).
-- Parameters: namespace id, document id, lo, hi.
SELECT id, position, text, heading_path, page, token_count
FROM kbctl.chunks
WHERE namespace_id = %s AND document_id = %s AND position BETWEEN %s AND %s
ORDER BY position
