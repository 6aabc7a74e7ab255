-- The namespace's write lock, for the rest of the transaction: writers of the corpus tables (several
-- workers of one run) take turns on the lexical statistics and vocabulary rows, which they all
-- update. Parameters: lock class, namespace id.
SELECT pg_advisory_xact_lock(%s, %s)
