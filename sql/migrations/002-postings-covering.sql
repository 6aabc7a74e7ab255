-- Index-only BM25. The lexical lane reads (term, chunk_id, tf, dl) for every posting of the query's
-- terms. With tf and dl in the primary key's index (INCLUDE), a term's postings are consecutive
-- index entries and the scan never visits the heap (once VACUUM has marked the pages all-visible):
-- at 100k chunks a common term's 37k postings are ~200 index pages instead of ~37k heap pages.
ALTER TABLE kbctl.lexical_postings DROP CONSTRAINT lexical_postings_pkey;
ALTER TABLE kbctl.lexical_postings
    ADD CONSTRAINT lexical_postings_pkey PRIMARY KEY (namespace_id, term, chunk_id) INCLUDE (tf, dl);
