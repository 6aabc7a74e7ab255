-- A stable pseudo-random sample of a namespace's chunks. Parameters: namespace id, sample size.
SELECT id, content_hash, embedding FROM kbctl.chunks WHERE namespace_id = %s ORDER BY md5(id::text) LIMIT %s
