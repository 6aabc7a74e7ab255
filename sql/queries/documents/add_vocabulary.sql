-- Add document frequencies to a namespace's vocabulary. Parameters: namespace id, terms, counts.
INSERT INTO kbctl.lexical_vocab (namespace_id, term, df)
SELECT %s, t, n FROM unnest(%s::text[], %s::int[]) AS x(t, n)
ON CONFLICT (namespace_id, term) DO UPDATE SET df = kbctl.lexical_vocab.df + EXCLUDED.df
