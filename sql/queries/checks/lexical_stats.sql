-- A namespace's lexical statistics row. Parameters: namespace id.
SELECT chunk_count, total_length FROM kbctl.lexical_stats WHERE namespace_id = %s
