-- Take document frequencies off a namespace's vocabulary. Parameters: namespace id, terms, counts.
-- One primary-key lookup per term (the arbiter of ON CONFLICT), so the cost follows the terms given,
-- never the namespace's vocabulary, whatever the planner estimates: a join of the vocabulary with
-- the postings here once read all of a young namespace's vocabulary once per term, for every batch
-- of a re-import. Terms left at 0 stay (readers skip them) until the run ends
-- (drop_unused_vocabulary), so a re-import does not delete and insert them again batch by batch.
-- A term not in the vocabulary (the postings put every term there) would be inserted at a negative
-- count, and dropped with the unused ones.
INSERT INTO kbctl.lexical_vocab AS v (namespace_id, term, df)
SELECT %s, t, -n FROM unnest(%s::text[], %s::int[]) AS x(t, n)
ON CONFLICT (namespace_id, term) DO UPDATE SET df = v.df + EXCLUDED.df
