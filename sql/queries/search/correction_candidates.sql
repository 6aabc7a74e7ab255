-- The most frequent terms that may be a misspelled term's correction: within the edit distance in
-- length, sharing its first or its second letter (stored columns, indexed: migration 010).
-- Parameters: namespace ids, shortest length, longest length, first letter, second letter.
SELECT term, sum(df) AS df
FROM kbctl.lexical_vocab
WHERE namespace_id = ANY(%s)
  AND length(term) BETWEEN %s AND %s AND (first_letter = %s OR second_letter = %s)
  AND df > 0  -- a term at 0 is held by no document (documents/drop_unused_vocabulary)
GROUP BY term
ORDER BY df DESC
LIMIT 5000
