-- The installed pgvector version (no row without the extension).
SELECT extversion FROM pg_extension WHERE extname = 'vector'
