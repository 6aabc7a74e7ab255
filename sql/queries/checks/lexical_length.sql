-- The lexical length of a namespace's chunks, summed. Parameters: namespace id.
SELECT coalesce(sum(lex_length), 0) FROM kbctl.chunks WHERE namespace_id = %s
