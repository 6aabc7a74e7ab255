-- The k chunks nearest to the query vector in one generation.
-- Template: vec is v.embedding or v.half (exact: scans the rows the WHERE clause leaves) or that
-- column cast to typ(d) (ordered by the generation's partial HNSW index); typ vector or halfvec; op
-- the distance operator; d the dimension; gid the generation id (the index's predicate, a literal
-- so the planner can match it); join the chunks (c) when filtered, else nothing (a vector carries
-- its chunk's document id); f the filters' condition.
-- Parameters: the query vector, namespace ids, the filters' parameters, the query vector, k.
SELECT v.namespace_id, v.chunk_id, {vec} {op} %s::{typ}({d}) AS dist, v.document_id
FROM kbctl.vectors v{join}
WHERE v.generation_id = {gid} AND v.namespace_id = ANY(%s) AND {f}
ORDER BY {vec} {op} %s::{typ}({d})
LIMIT %s
