-- Bulk load of chunk rows (binary COPY: the column types are set by the writer, in this order).
COPY kbctl.chunks (namespace_id, id, document_id, position, text, token_count, char_start, char_end, heading_path,
                   page, content_hash, metadata, profile_id, dimension, embedding, lex_length) FROM STDIN (FORMAT BINARY)
