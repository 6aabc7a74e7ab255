-- Record a profile (once per fingerprint); returns its id.
-- Parameters: name, fingerprint, embedder, model, revision, dimension, distance, normalize,
-- query prefix, document prefix, max tokens, settings (JSON).
INSERT INTO kbctl.profiles (name, fingerprint, embedder, model, revision, dimension, distance,
                            normalize, query_prefix, document_prefix, max_tokens, settings)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (fingerprint) DO UPDATE SET name = kbctl.profiles.name
RETURNING id
