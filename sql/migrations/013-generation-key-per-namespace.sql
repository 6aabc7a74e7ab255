-- A generation is keyed by (namespace_id, id) only. UNIQUE (id) of migration 011 added nothing (the id
-- is an identity, unique by construction, and no key references it alone), and distributed
-- PostgreSQL refuses a unique key without the distribution column (docs/scale-out.md): with it gone,
-- every primary, unique and foreign key of the corpus tables includes namespace_id.
ALTER TABLE kbctl.generations DROP CONSTRAINT IF EXISTS generations_id_key;
