-- The position of a chunk in its document. Parameters: namespace id, document id, chunk id.
SELECT position FROM kbctl.chunks WHERE namespace_id = %s AND document_id = %s AND id = %s
