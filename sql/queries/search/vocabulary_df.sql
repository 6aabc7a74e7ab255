-- Document frequency of each query term over the namespaces (absent terms are missing; a term at 0
-- is one a replacement left until the run ends, documents/drop_unused_vocabulary).
-- Parameters: namespace ids, the terms.
SELECT term, sum(df)::int
FROM kbctl.lexical_vocab
WHERE namespace_id = ANY(%s) AND term = ANY(%s) AND df > 0
GROUP BY term
