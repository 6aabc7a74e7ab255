-- Bulk load of vectors into the session's stage table (binary COPY; the writer sets the types).
COPY pg_temp.stage_vectors (namespace_id, chunk_id, generation_id, profile_id, dimension, storage, embedding)
FROM STDIN (FORMAT BINARY)
