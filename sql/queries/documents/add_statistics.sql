-- Add to a namespace's lexical statistics (negative to remove).
-- Parameters: namespace id, chunk count, total length.
INSERT INTO kbctl.lexical_stats (namespace_id, chunk_count, total_length) VALUES (%s, %s, %s)
ON CONFLICT (namespace_id) DO UPDATE SET chunk_count = kbctl.lexical_stats.chunk_count + EXCLUDED.chunk_count,
  total_length = kbctl.lexical_stats.total_length + EXCLUDED.total_length
