-- The k chunks nearest to the query vector.
-- Template: vec is c.embedding (exact: scans the rows the WHERE clause leaves) or
-- c.embedding::vector(d) (ordered by the profile's partial HNSW index); op the distance operator;
-- d the dimension; pid the profile id (the index's predicate); f the filters' condition.
-- Parameters: the query vector, namespace ids, the filters' parameters, the query vector, k.
SELECT c.namespace_id, c.id, {vec} {op} %s::vector({d}) AS dist, c.document_id
FROM kbctl.chunks c
WHERE c.profile_id = {pid} AND c.namespace_id = ANY(%s) AND {f}
ORDER BY {vec} {op} %s::vector({d})
LIMIT %s
