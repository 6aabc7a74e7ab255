-- A recorded profile's pin (what its vectors mean). Parameters: profile id.
SELECT name, embedder, model, revision, dimension, distance, normalize, query_prefix, document_prefix, max_tokens,
       settings, fingerprint
FROM kbctl.profiles
WHERE id = %s
