-- The top k chunks of a namespace for a sampled chunk's vector, through the profile's HNSW index
-- (run under the profile's ef_search, as a search is): what verify's recall figure counts.
-- Template: pid the profile id, d the dimension, op the distance operator.
-- Parameters: namespace id, the vector, the vector, k.
SELECT id, content_hash, embedding::vector({d}) {op} %s::vector({d}) AS dist
FROM kbctl.chunks
WHERE profile_id = {pid} AND namespace_id = %s
ORDER BY embedding::vector({d}) {op} %s::vector({d})
LIMIT %s
