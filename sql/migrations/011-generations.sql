-- Generations (docs/lifecycle.md): a namespace's vectors belong to a generation, a (profile, vector
-- storage) pair, so a namespace can hold a second set of vectors (another model, another dimension,
-- halfvec) while the first one keeps serving, and switch to it in one transaction.
--
-- A namespace has exactly one active generation, at most one shadow (being built) and at most one
-- previous (kept for rollback). Vectors move out of kbctl.chunks into kbctl.vectors, keyed by
-- (namespace, chunk, generation); their chunk's deletion cascades to every generation's vector, and
-- a vector's size is tied to its generation's profile by keys and a CHECK, as the inline column was.
-- Each generation has its own partial HNSW index (vectors_hnsw_g<id>), typed to its dimension and
-- storage; kbctl creates it with the generation.

CREATE TABLE kbctl.generations (
    namespace_id integer     NOT NULL REFERENCES kbctl.namespaces (id) ON DELETE CASCADE,
    id           integer     GENERATED ALWAYS AS IDENTITY,  -- unique over namespaces: it names the index
    profile_id   integer     NOT NULL,
    dimension    integer     NOT NULL,
    storage      text        NOT NULL DEFAULT 'vector' CHECK (storage IN ('vector', 'halfvec')),
    state        text        NOT NULL CHECK (state IN ('active', 'shadow', 'previous')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    activated_at timestamptz,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace_id, id),
    UNIQUE (id),
    UNIQUE (namespace_id, id, profile_id, dimension, storage),
    FOREIGN KEY (profile_id, dimension) REFERENCES kbctl.profiles (id, dimension),
    -- One generation per state and namespace: one active, one shadow, one previous at most. Checked
    -- at commit, so a rollback exchanges the active and the previous in one statement.
    CONSTRAINT generations_one_per_state UNIQUE (namespace_id, state) DEFERRABLE INITIALLY DEFERRED
);

CREATE TABLE kbctl.vectors (
    namespace_id  integer NOT NULL,
    chunk_id      bigint  NOT NULL,
    generation_id integer NOT NULL,
    document_id   bigint  NOT NULL,  -- the chunk's (which never changes): an unfiltered dense scan reads no chunk row
    profile_id    integer NOT NULL,
    dimension     integer NOT NULL,
    storage       text    NOT NULL,
    embedding     vector,   -- storage 'vector' (4 bytes a dimension)
    half          halfvec,  -- storage 'halfvec' (2 bytes a dimension)
    PRIMARY KEY (namespace_id, chunk_id, generation_id),
    FOREIGN KEY (namespace_id, chunk_id) REFERENCES kbctl.chunks (namespace_id, id) ON DELETE CASCADE,
    FOREIGN KEY (namespace_id, generation_id, profile_id, dimension, storage)
        REFERENCES kbctl.generations (namespace_id, id, profile_id, dimension, storage) ON DELETE CASCADE,
    CHECK (CASE storage WHEN 'vector' THEN half IS NULL AND vector_dims(embedding) = dimension
                        ELSE embedding IS NULL AND vector_dims(half) = dimension END)
);
-- Vectors stay in their row (migration 005 tells why): a 768-d vector alone passes the TOAST threshold.
ALTER TABLE kbctl.vectors ALTER COLUMN embedding SET STORAGE MAIN;
ALTER TABLE kbctl.vectors ALTER COLUMN half SET STORAGE MAIN;

-- The data: generation 1 of every namespace is its profile, stored as vector, with the vectors the
-- chunks hold. The owner is held to the forced policies of 009, so they are lifted for the move.
ALTER TABLE kbctl.namespaces NO FORCE ROW LEVEL SECURITY;
ALTER TABLE kbctl.chunks NO FORCE ROW LEVEL SECURITY;

INSERT INTO kbctl.generations (namespace_id, profile_id, dimension, storage, state, created_at, activated_at)
SELECT id, profile_id, dimension, 'vector', 'active', created_at, created_at FROM kbctl.namespaces ORDER BY id;

INSERT INTO kbctl.vectors (namespace_id, chunk_id, generation_id, document_id, profile_id, dimension, storage, embedding)
SELECT c.namespace_id, c.id, g.id, c.document_id, c.profile_id, c.dimension, 'vector', c.embedding
FROM kbctl.chunks c
JOIN kbctl.generations g ON g.namespace_id = c.namespace_id AND g.state = 'active';

-- Each generation's HNSW index, built over the rows just moved, with the build settings of its
-- profile's old index (pgvector's defaults if it had none).
DO $$
DECLARE
    g record;
    opts text;
BEGIN
    FOR g IN SELECT gen.id, gen.dimension, gen.profile_id, p.distance
             FROM kbctl.generations gen JOIN kbctl.profiles p ON p.id = gen.profile_id LOOP
        SELECT array_to_string(c.reloptions, ', ') INTO opts
        FROM pg_class c WHERE c.relnamespace = 'kbctl'::regnamespace AND c.relname = 'chunks_hnsw_p' || g.profile_id;
        EXECUTE format(
            'CREATE INDEX %I ON kbctl.vectors USING hnsw ((embedding::vector(%s)) %s) WITH (%s) WHERE generation_id = %s',
            'vectors_hnsw_g' || g.id, g.dimension,
            CASE g.distance WHEN 'cosine' THEN 'vector_cosine_ops' WHEN 'l2' THEN 'vector_l2_ops' ELSE 'vector_ip_ops' END,
            coalesce(nullif(opts, ''), 'm = 16, ef_construction = 64'), g.id);
    END LOOP;
END
$$;

-- The inline column goes, with its profile key, CHECK and per-profile HNSW indexes (the space is
-- reclaimed when rows are rewritten: `kbctl db optimize --full`). The embed cache now finds a
-- chunk text's vectors through its content hash, in any generation.
ALTER TABLE kbctl.chunks DROP COLUMN embedding, DROP COLUMN profile_id, DROP COLUMN dimension;
CREATE INDEX chunks_content_hash ON kbctl.chunks (content_hash);

ALTER TABLE kbctl.namespaces FORCE ROW LEVEL SECURITY;
ALTER TABLE kbctl.chunks FORCE ROW LEVEL SECURITY;

ALTER TABLE kbctl.generations ENABLE ROW LEVEL SECURITY;
ALTER TABLE kbctl.generations FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON kbctl.generations USING (namespace_id = ANY ((SELECT kbctl.tenant_namespace_ids())::integer[]));

ALTER TABLE kbctl.vectors ENABLE ROW LEVEL SECURITY;
ALTER TABLE kbctl.vectors FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON kbctl.vectors USING (namespace_id = ANY ((SELECT kbctl.tenant_namespace_ids())::integer[]));

GRANT SELECT, INSERT, UPDATE, DELETE ON kbctl.generations, kbctl.vectors TO kbctl_tenant;
GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA kbctl TO kbctl_tenant;

ANALYZE kbctl.generations;
ANALYZE kbctl.vectors;
