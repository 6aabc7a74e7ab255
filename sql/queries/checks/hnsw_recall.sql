-- The top k chunks of a namespace for a sampled chunk's vector, through its generation's HNSW index
-- (run under the profile's ef_search, as a search is): what verify's recall figure counts.
-- Template: gid the generation id, col its column, typ its type, d the dimension, op the distance
-- operator. Parameters: namespace id, the vector, the vector, k.
SELECT v.chunk_id, c.content_hash, v.{col}::{typ}({d}) {op} %s::{typ}({d}) AS dist
FROM kbctl.vectors v
JOIN kbctl.chunks c ON c.namespace_id = v.namespace_id AND c.id = v.chunk_id
WHERE v.generation_id = {gid} AND v.namespace_id = %s
ORDER BY v.{col}::{typ}({d}) {op} %s::{typ}({d})
LIMIT %s
