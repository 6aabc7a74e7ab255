-- The session's stage table of a bulk load of vectors (COPY FROM is refused under row-level
-- security), dropped at commit. A halfvec generation's vectors are loaded as vector and cast.
CREATE TEMP TABLE IF NOT EXISTS stage_vectors ON COMMIT DROP AS
SELECT namespace_id, chunk_id, generation_id, profile_id, dimension, storage, embedding FROM kbctl.vectors WITH NO DATA
