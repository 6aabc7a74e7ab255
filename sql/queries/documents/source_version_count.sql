-- How many versions of a source the stored documents come from (0: none stored; more than 1: a feed
-- whose entries that left it were kept by runs without --sync). Parameters: namespace id, source URI.
SELECT count(DISTINCT source_hash) FROM kbctl.documents WHERE namespace_id = %s AND source_uri = %s
