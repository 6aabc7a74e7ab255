-- The setting the BM25 statement runs under (in its own transaction). The planner's estimate of a
-- term's postings is far too low (10 for 1,800), and the row-level security policy's condition
-- (migration 009) lowers it further, which tipped the aggregate from hashing to sorting every
-- posting first (+3 ms on 15k postings). Only the final top-k sort is needed: it stays.
SET LOCAL enable_sort = off
