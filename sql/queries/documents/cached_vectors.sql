-- Vectors already stored under a profile for these chunk hashes: one row per hash, read through the
-- (profile, hash) index (a text repeated many times is not read once per copy). Parameters: hashes, profile id.
SELECT h, v.embedding
FROM unnest(%s::text[]) AS h
CROSS JOIN LATERAL (
  SELECT embedding FROM kbctl.chunks WHERE profile_id = %s AND content_hash = h LIMIT 1
) v
