-- How many chunks these documents have, and their lexical length. Parameters: namespace id, document ids.
SELECT count(*), coalesce(sum(lex_length), 0) FROM kbctl.chunks WHERE namespace_id = %s AND document_id = ANY(%s)
