-- Document frequency of each query term over the namespaces (absent terms are missing).
-- Parameters: namespace ids, the terms.
SELECT term, sum(df)::int
FROM kbctl.lexical_vocab
WHERE namespace_id = ANY(%s) AND term = ANY(%s)
GROUP BY term
