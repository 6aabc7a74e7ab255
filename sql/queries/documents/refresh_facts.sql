-- The documents of sources skipped because their bytes did not change take the facts of this fetch
-- that can change without them (kbctl.types.REFRESHED_FACTS: a touched file's mtime, a response's
-- etag and last_modified), on the keys that are their source's (fact_keys: a key not listed is the
-- document's own, from its front matter; a row written before migration 023, NULL, is left). A row
-- whose facts are the same is not written, and no chunk carries a fetch fact, so none is written.
-- Parameters: a JSON list of {"uri", "source_hash", "facts": {fact: value}}, namespace id (twice).
WITH u AS (
    SELECT * FROM jsonb_to_recordset(%s::jsonb) AS u(uri text, source_hash text, facts jsonb)
), fresh AS (
    SELECT d.id,
           d.metadata || coalesce((SELECT jsonb_object_agg(f.key, f.value) FROM jsonb_each(u.facts) f
                                   WHERE f.key = ANY(d.fact_keys)), '{}') AS metadata
    FROM kbctl.documents d
    JOIN u ON d.source_uri = u.uri AND d.source_hash = u.source_hash
    WHERE d.namespace_id = %s AND d.fact_keys IS NOT NULL
)
UPDATE kbctl.documents d
SET metadata = fresh.metadata
FROM fresh
WHERE d.namespace_id = %s AND d.id = fresh.id AND d.metadata IS DISTINCT FROM fresh.metadata
