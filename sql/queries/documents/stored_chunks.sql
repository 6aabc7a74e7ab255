-- What the stored chunks of documents were made of (their order, text hash, span, tokens, page,
-- headings and PDF boxes), to tell whether chunking them again made the same chunks.
-- Parameters: namespace id, document ids.
SELECT document_id, content_hash, char_start, char_end, token_count, page, heading_path, metadata -> 'boxes'
FROM kbctl.chunks
WHERE namespace_id = %s AND document_id = ANY(%s)
ORDER BY document_id, position
