-- The top 3 chunks of a namespace for a vector, by the profile's HNSW index.
-- Template: pid the profile id, d the dimension, op the distance operator.
-- Parameters: namespace id, the vector.
SELECT id, content_hash
FROM kbctl.chunks
WHERE profile_id = {pid} AND namespace_id = %s
ORDER BY embedding::vector({d}) {op} %s::vector({d})
LIMIT 3
