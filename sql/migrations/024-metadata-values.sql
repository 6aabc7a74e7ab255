-- The values of the chunks' metadata, by key, for equality filters (`key=value`, `key in a,b`).
--
-- Under the tenants' row-level security no filter on chunks.metadata could use its GIN index
-- (`@>` is not leakproof, so the planner may not run it before the policy: every filter was a
-- sequential scan of the namespace). Text and integer equality are leakproof: this table holds one
-- row per top-level key of a chunk's metadata and per scalar of its value, or of its list's items
-- (a string's, a number's or a boolean's text, JSON null as 'null'), plus, for a number and a text
-- that reads as one (kbctl.store.filters._NUMERIC_TEXT), its canonical numeric text (4.50 and
-- "4.500" -> 4.5). Keys and values are cut at 200 characters (an entry fits a btree page): a lookup
-- finds a superset, and the filter's exact condition always runs on what it finds.
--
-- Kept exact by statement triggers on kbctl.chunks (every way chunks are written); an entry goes
-- with its chunk (ON DELETE CASCADE). docs/hardening.md, sessions 46 and 48.

CREATE FUNCTION kbctl.metadata_entries(m jsonb) RETURNS TABLE (key text, value text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT DISTINCT left(e.key, 200), v.value
    FROM jsonb_each(CASE WHEN jsonb_typeof(m) = 'object' THEN m ELSE '{}'::jsonb END) AS e
    CROSS JOIN LATERAL (
        SELECT a.x FROM jsonb_array_elements(CASE WHEN jsonb_typeof(e.value) = 'array' THEN e.value ELSE '[]'::jsonb END) AS a(x)
        UNION ALL
        SELECT e.value WHERE jsonb_typeof(e.value) <> 'array'
    ) AS s(x)
    CROSS JOIN LATERAL (
        SELECT left(coalesce(s.x #>> '{}', 'null'), 200)
        UNION ALL
        SELECT left(trim_scale(CASE
            WHEN jsonb_typeof(s.x) = 'number' THEN (s.x #>> '{}')::numeric
            WHEN jsonb_typeof(s.x) = 'string' AND (s.x #>> '{}') ~ '^[+-]?([0-9]{1,255}(\.[0-9]{0,255})?|\.[0-9]{1,255})([eE][+-]?[0-9]{1,3})?$'
                THEN (s.x #>> '{}')::numeric
        END)::text, 200)
    ) AS v(value)
    WHERE jsonb_typeof(s.x) IN ('string', 'number', 'boolean', 'null') AND v.value IS NOT NULL
$$;

-- The entries a filter's values are looked up by: each text (cut as entries are) and each number's
-- canonical numeric text. Called with parameters only, so it never stands between a column and the
-- index.
CREATE FUNCTION kbctl.metadata_lookup(texts text[], numbers text[]) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(array_agg(DISTINCT v), '{}') FROM (
        SELECT left(t, 200) FROM unnest(texts) AS t
        UNION ALL
        SELECT left(trim_scale(n::numeric)::text, 200) FROM unnest(numbers) AS n
    ) AS s(v)
$$;

CREATE TABLE kbctl.metadata_values (
    namespace_id integer NOT NULL,
    key          text    NOT NULL,
    value        text    NOT NULL,
    chunk_id     bigint  NOT NULL
);

-- The triggers run as the writer (a tenant's role: its rows pass the policy's check).
CREATE FUNCTION kbctl.metadata_values_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO kbctl.metadata_values (namespace_id, key, value, chunk_id)
    SELECT n.namespace_id, e.key, e.value, n.id
    FROM new_chunks n CROSS JOIN LATERAL kbctl.metadata_entries(n.metadata) AS e;
    RETURN NULL;
END
$$;

-- An update replaces the entries of the chunks whose metadata (or key) changed.
CREATE FUNCTION kbctl.metadata_values_updated() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM kbctl.metadata_values mv
    USING old_chunks o
    WHERE mv.namespace_id = o.namespace_id AND mv.chunk_id = o.id
      AND NOT EXISTS (SELECT FROM new_chunks n
                      WHERE n.namespace_id = o.namespace_id AND n.id = o.id AND n.metadata = o.metadata);
    INSERT INTO kbctl.metadata_values (namespace_id, key, value, chunk_id)
    SELECT n.namespace_id, e.key, e.value, n.id
    FROM new_chunks n CROSS JOIN LATERAL kbctl.metadata_entries(n.metadata) AS e
    WHERE NOT EXISTS (SELECT FROM old_chunks o
                      WHERE o.namespace_id = n.namespace_id AND o.id = n.id AND o.metadata = n.metadata);
    RETURN NULL;
END
$$;

-- First: the triggers' lock holds writers off until the table is filled.
CREATE TRIGGER metadata_values_insert AFTER INSERT ON kbctl.chunks
    REFERENCING NEW TABLE AS new_chunks FOR EACH STATEMENT EXECUTE FUNCTION kbctl.metadata_values_inserted();
CREATE TRIGGER metadata_values_update AFTER UPDATE ON kbctl.chunks
    REFERENCING OLD TABLE AS old_chunks NEW TABLE AS new_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION kbctl.metadata_values_updated();

-- The entries of the chunks already stored, one namespace at a time. The owner is held to the
-- forced policies of 009, so they are lifted for the fill (as 011 does).
ALTER TABLE kbctl.namespaces NO FORCE ROW LEVEL SECURITY;
ALTER TABLE kbctl.chunks NO FORCE ROW LEVEL SECURITY;

DO $$
DECLARE
    ns integer;
BEGIN
    FOR ns IN SELECT id FROM kbctl.namespaces ORDER BY id LOOP
        INSERT INTO kbctl.metadata_values (namespace_id, key, value, chunk_id)
        SELECT c.namespace_id, e.key, e.value, c.id
        FROM kbctl.chunks c CROSS JOIN LATERAL kbctl.metadata_entries(c.metadata) AS e
        WHERE c.namespace_id = ns;
    END LOOP;
END
$$;

-- Key first by value (index-only lookups); by chunk for the cascade. The foreign key is NOT VALID:
-- its rows were just made from the chunks, and validating it as an owner that is not a superuser,
-- under the policies, checks row by row.
ALTER TABLE kbctl.metadata_values ADD PRIMARY KEY (namespace_id, key, value, chunk_id);
CREATE INDEX metadata_values_chunk ON kbctl.metadata_values (namespace_id, chunk_id);
ALTER TABLE kbctl.metadata_values ADD FOREIGN KEY (namespace_id, chunk_id)
    REFERENCES kbctl.chunks (namespace_id, id) ON DELETE CASCADE NOT VALID;

ALTER TABLE kbctl.metadata_values ENABLE ROW LEVEL SECURITY;
ALTER TABLE kbctl.metadata_values FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON kbctl.metadata_values USING (namespace_id = ANY ((SELECT kbctl.tenant_namespace_ids())::integer[]));
GRANT SELECT, INSERT, UPDATE, DELETE ON kbctl.metadata_values TO kbctl_tenant;

ALTER TABLE kbctl.namespaces FORCE ROW LEVEL SECURITY;
ALTER TABLE kbctl.chunks FORCE ROW LEVEL SECURITY;

-- No filter used it under the policies (its operator is not leakproof); every write kept it.
DROP INDEX kbctl.chunks_metadata;

ANALYZE kbctl.metadata_values;
