-- Vectors already stored under a profile for these chunk hashes. Parameters: profile id, hashes.
SELECT DISTINCT ON (content_hash) content_hash, embedding
FROM kbctl.chunks
WHERE profile_id = %s AND content_hash = ANY(%s)
