-- Load pgvector's library in this session (its type input function lives there), so that the
-- hnsw.* settings it defines are real settings, not placeholders, when probe/hnsw_settings reads them.
SELECT '[1]'::vector IS NOT NULL
