-- Memory for packing: the window sort of a large namespace's postings stays in memory.
SET LOCAL work_mem = '256MB'
