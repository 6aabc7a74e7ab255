-- Documents of a changed source found unchanged keep their rows and take the source's new hash and
-- the fetch facts of its new fetch (on the document row, with the keys they are under, fact_keys;
-- chunks carry none of them), unless their row was written again (a new id) or its ACL changed
-- since it was read. A JSON list of {"id", "source_hash", "acl": [entries] or null, "explicit",
-- "facts": {fact: value} of the new fetch, "drop": [fact keys the new fetch did not give]}. A row
-- written before migration 023 (fact_keys NULL) may have chunks that still carry their facts: they
-- lose them once, here (the other CTEs see the rows as they were before this statement); no other
-- chunk row is touched.
-- Returns the URIs kept. Parameters: the list, namespace id (three times).
WITH u AS (
    SELECT * FROM jsonb_to_recordset(%s::jsonb)
        AS u(id bigint, source_hash text, acl jsonb, explicit boolean, facts jsonb, drop text[])
), kept AS (
    UPDATE kbctl.documents d
    SET source_hash = u.source_hash, metadata = (d.metadata - u.drop) || u.facts,
        fact_keys = ARRAY(SELECT jsonb_object_keys(u.facts) ORDER BY 1)
    FROM u
    WHERE d.namespace_id = %s AND d.id = u.id
      AND d.acl IS NOT DISTINCT FROM (CASE WHEN jsonb_typeof(u.acl) = 'array' THEN ARRAY(SELECT jsonb_array_elements_text(u.acl)) END)
      AND d.acl_explicit = u.explicit
    RETURNING d.id, d.uri, u.facts, u.drop
), older AS (
    SELECT k.id, ARRAY(SELECT jsonb_object_keys(k.facts)) || k.drop AS strip
    FROM kept k
    JOIN kbctl.documents o ON o.id = k.id
    WHERE o.namespace_id = %s AND o.fact_keys IS NULL
), stripped AS (
    UPDATE kbctl.chunks c
    SET metadata = c.metadata - s.strip
    FROM older s
    WHERE c.namespace_id = %s AND c.document_id = s.id AND c.metadata ?| s.strip
)
SELECT uri FROM kept
