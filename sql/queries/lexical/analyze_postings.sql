-- Fresh statistics of the postings before a pack reads them three times and joins them to the
-- chunks' ordinals. Right after a bulk ingest into a new database (a fast embedder, autovacuum not
-- yet round) the planner took the table for empty and joined 378,126 postings to 6,002 chunk
-- ordinals by a nested loop: 100 s to pack 6,002 chunks, and twelve minutes for 20,000, against
-- 1.4 s with the statistics. ANALYZE samples a fixed number of rows (some 30,000), whatever the
-- table's size, and runs in the pack's transaction; it needs the table's owner.
ANALYZE kbctl.lexical_postings
