-- Okapi BM25 of the chunks holding the query terms, scored from the postings (index-only), within
-- one range of chunk ids (the whole range, or one half of a split lane).
-- Template: join is empty, or a join to kbctl.chunks c that applies the filters.
-- Parameters: k1 + 1, k1, b, b, avgdl, the terms, their query weights (idf included), namespace ids,
-- lowest chunk id, highest chunk id, the filters' parameters (with a join), k.
SELECT p.namespace_id, p.chunk_id, sum(q.w * p.tf * %s / (p.tf + %s * (1 - %s + %s * p.dl / %s))) AS score
FROM unnest(%s::text[], %s::float8[]) AS q(term, w)
JOIN kbctl.lexical_postings p ON p.term = q.term AND p.namespace_id = ANY(%s)
  AND p.chunk_id BETWEEN %s AND %s
{join}
GROUP BY p.namespace_id, p.chunk_id
ORDER BY score DESC, p.chunk_id
LIMIT %s
