-- Chunks without a vector of the namespace's profile and dimension.
-- Parameters: namespace id, profile id, dimension.
SELECT count(*)
FROM kbctl.chunks
WHERE namespace_id = %s AND (embedding IS NULL OR profile_id <> %s OR vector_dims(embedding) <> %s)
