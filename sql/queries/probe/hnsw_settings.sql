-- The hnsw.* settings the loaded pgvector defines (0.5: ef_search; 0.8: iterative_scan, max_scan_tuples…).
SELECT name FROM pg_settings WHERE starts_with(name, 'hnsw.') ORDER BY name
