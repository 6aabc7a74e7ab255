-- Okapi BM25 of the given chunks only (pseudo-relevance feedback rescoring the first round's
-- candidates). The chunk ids lead: the (namespace_id, chunk_id) index reads only the candidates'
-- postings (about a millisecond for 200 chunks), whatever the terms' postings; joining the term
-- list first read every posting of every term (70 ms). Chunks holding none of the terms are missing
-- (their score is 0); the caller keeps only its (namespace, chunk) pairs.
-- Parameters: k1 + 1, k1, b, b, avgdl, the terms, their query weights (idf included), namespace
-- ids, chunk ids, the terms.
SELECT p.namespace_id, p.chunk_id, sum(q.w * p.tf * %s / (p.tf + %s * (1 - %s + %s * p.dl / %s))) AS score
FROM kbctl.lexical_postings p
JOIN unnest(%s::text[], %s::float8[]) AS q(term, w) ON q.term = p.term
WHERE p.namespace_id = ANY(%s) AND p.chunk_id = ANY(%s) AND p.term = ANY(%s)
GROUP BY p.namespace_id, p.chunk_id
