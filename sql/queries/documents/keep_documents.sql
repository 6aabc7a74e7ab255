-- Documents of a changed source found unchanged keep their rows and take the source's new hash and
-- the fetch facts of its new fetch (on the document and each of its chunks, whose metadata carries
-- the document's), unless their row was written again (a new id) or its ACL changed since it was
-- read. A JSON list of {"id", "source_hash", "acl": [entries] or null, "explicit", "facts": {fact:
-- value} of the new fetch, "drop": [fact keys the new fetch did not give]}. Chunks whose facts did
-- not change are not touched (the other CTEs see the rows as they were before this statement).
-- Returns the URIs kept. Parameters: the list, namespace id (three times).
WITH u AS (
    SELECT * FROM jsonb_to_recordset(%s::jsonb)
        AS u(id bigint, source_hash text, acl jsonb, explicit boolean, facts jsonb, drop text[])
), kept AS (
    UPDATE kbctl.documents d
    SET source_hash = u.source_hash, metadata = (d.metadata - u.drop) || u.facts
    FROM u
    WHERE d.namespace_id = %s AND d.id = u.id
      AND d.acl IS NOT DISTINCT FROM (CASE WHEN jsonb_typeof(u.acl) = 'array' THEN ARRAY(SELECT jsonb_array_elements_text(u.acl)) END)
      AND d.acl_explicit = u.explicit
    RETURNING d.id, d.uri, u.facts, u.drop
), stale AS (
    SELECT k.id, k.facts, k.drop
    FROM kept k
    JOIN kbctl.documents o ON o.id = k.id
    WHERE o.namespace_id = %s AND (o.metadata - k.drop) || k.facts IS DISTINCT FROM o.metadata
), refreshed AS (
    UPDATE kbctl.chunks c
    SET metadata = (c.metadata - s.drop) || s.facts
    FROM stale s
    WHERE c.namespace_id = %s AND c.document_id = s.id
)
SELECT uri FROM kept
