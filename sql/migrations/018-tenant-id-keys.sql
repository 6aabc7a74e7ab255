-- Each tenant's secret key for the opaque ids its agents see (kbctl.ids, kbctl.server).
--
-- Document, chunk, query-log and generation ids come from sequences every tenant shares: handed to
-- an agent raw, the gap between two of its ids would count what other tenants did meanwhile, and
-- an id could be guessed. The server seals each id it gives out under its tenant's key (a keyed
-- permutation) and opens what it is given under the same key, so the key is per tenant (two
-- tenants' ids cannot be correlated) and kept here, in the database (the same ids across restarts
-- and across several servers on one database).
--
-- 32 random bytes from two version-4 UUIDs: gen_random_uuid is core PostgreSQL since 13 and draws
-- on the server's strong random source (pg_strong_random). A volatile default: every existing
-- tenant gets its own key as the column is added. A tenant's role reads its own row only (policy
-- own_row, migration 009) and may not change it; `kbctl tenants` lists no key.
ALTER TABLE kbctl.tenants
    ADD COLUMN id_key bytea NOT NULL DEFAULT (uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()))
        CHECK (octet_length(id_key) >= 16);
