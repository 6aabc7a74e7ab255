-- Tenants in PostgreSQL: every table of corpus, run, audit and agent data is under row-level
-- security keyed by tenant, FORCEd so that the tables' owner is held to it as well.
--
-- kbctl connects as the owner (or, embedded, a superuser, which bypasses RLS whatever the table
-- says), migrates, then `SET ROLE`s every connection it opens for a tenant to that tenant's role:
-- NOLOGIN, not the owner, a member of kbctl_tenant (which holds the table privileges). A policy
-- reads the tenant from current_user through kbctl.tenants, so no setting a statement could change
-- widens what a tenant's role sees. Roles are cluster-wide: a tenant's role is the same in every
-- database of a server.
--
-- The namespace-keyed tables (postings above all: a BM25 scan reads ~1 µs per posting) test
-- `namespace_id = ANY ((SELECT kbctl.tenant_namespace_ids())::integer[])`: the sub-select is an initplan, run
-- once per statement, and int4 equality is leakproof, so the test may join the index condition.

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'kbctl_tenant') THEN
        CREATE ROLE kbctl_tenant NOLOGIN;
    END IF;
END
$$;

-- The registry of tenants and their roles. Enabled, not forced: its owner administers tenants
-- (`kbctl tenants`), a tenant's role reads its own row only.
CREATE TABLE kbctl.tenants (
    name       text        PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$'),
    role       name        NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE kbctl.tenants ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_row ON kbctl.tenants USING (role = current_user);

-- The role of a tenant: kbctl_t_<name>, shortened with a hash past PostgreSQL's 63 bytes.
CREATE FUNCTION kbctl.tenant_role(tenant text) RETURNS name LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN octet_length(tenant) <= 55 THEN 'kbctl_t_' || tenant
                ELSE 'kbctl_t_' || left(tenant, 38) || '_' || left(md5(tenant), 16) END::name
$$;

-- The tenant whose role is current_user (NULL for any other role: it sees no rows).
CREATE FUNCTION kbctl.current_tenant() RETURNS text LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT name FROM kbctl.tenants WHERE role = current_user $$;

-- The ids of the current tenant's namespaces (read under the namespaces' own policy).
CREATE FUNCTION kbctl.tenant_namespace_ids() RETURNS integer[] LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT coalesce(array_agg(id), '{}') FROM kbctl.namespaces WHERE tenant = kbctl.current_tenant() $$;

-- Register a tenant and create its role (once), which the calling role may then SET ROLE to.
-- Needs CREATEROLE (or a superuser). Returns the role's name.
CREATE FUNCTION kbctl.create_tenant(tenant text) RETURNS name LANGUAGE plpgsql
AS $$
DECLARE
    r name := kbctl.tenant_role(tenant);
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN
        EXECUTE format('CREATE ROLE %I NOLOGIN IN ROLE kbctl_tenant', r);
    END IF;
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        NULL;  -- a superuser may SET ROLE to any role
    ELSIF current_setting('server_version_num')::int >= 160000 THEN
        IF NOT pg_has_role(current_user, r, 'SET') THEN
            EXECUTE format('GRANT %I TO %I WITH INHERIT FALSE, SET TRUE', r, current_user);
        END IF;
    ELSIF NOT pg_has_role(current_user, r, 'MEMBER') THEN
        EXECUTE format('GRANT %I TO %I', r, current_user);
    END IF;
    INSERT INTO kbctl.tenants (name, role) VALUES (tenant, r) ON CONFLICT (name) DO NOTHING;
    RETURN (SELECT role FROM kbctl.tenants WHERE name = tenant);
END
$$;

-- The server finds a bearer token's tenant before it knows the tenant: a definer's lookup by hash,
-- the one way past agent_tokens' policy (that table is enabled, not forced, for this).
CREATE FUNCTION kbctl.agent_of_token(hash text) RETURNS TABLE (tenant text, agent text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT t.tenant, t.agent FROM kbctl.agent_tokens t WHERE t.token_hash = hash AND t.revoked_at IS NULL $$;

-- Every tenant already named in the data, and the default one, gets its role now (before the
-- policies: the owner reads no namespace once they are forced).
SELECT kbctl.create_tenant(t)
FROM (SELECT 'default' AS t UNION SELECT tenant FROM kbctl.namespaces UNION SELECT tenant FROM kbctl.search_audit
      UNION SELECT tenant FROM kbctl.agent_tokens UNION SELECT tenant FROM kbctl.query_log) s
WHERE t ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$';

-- Tenant-keyed tables.
ALTER TABLE kbctl.namespaces ENABLE ROW LEVEL SECURITY;
ALTER TABLE kbctl.namespaces FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON kbctl.namespaces USING (tenant = (SELECT kbctl.current_tenant()));

ALTER TABLE kbctl.search_audit ENABLE ROW LEVEL SECURITY;
ALTER TABLE kbctl.search_audit FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON kbctl.search_audit USING (tenant = (SELECT kbctl.current_tenant()));

ALTER TABLE kbctl.query_log ENABLE ROW LEVEL SECURITY;
ALTER TABLE kbctl.query_log FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON kbctl.query_log USING (tenant = (SELECT kbctl.current_tenant()));

ALTER TABLE kbctl.agent_tokens ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON kbctl.agent_tokens USING (tenant = (SELECT kbctl.current_tenant()));

-- Namespace-keyed tables.
ALTER TABLE kbctl.documents ENABLE ROW LEVEL SECURITY;
ALTER TABLE kbctl.documents FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON kbctl.documents USING (namespace_id = ANY ((SELECT kbctl.tenant_namespace_ids())::integer[]));

ALTER TABLE kbctl.chunks ENABLE ROW LEVEL SECURITY;
ALTER TABLE kbctl.chunks FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON kbctl.chunks USING (namespace_id = ANY ((SELECT kbctl.tenant_namespace_ids())::integer[]));

ALTER TABLE kbctl.lexical_postings ENABLE ROW LEVEL SECURITY;
ALTER TABLE kbctl.lexical_postings FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON kbctl.lexical_postings USING (namespace_id = ANY ((SELECT kbctl.tenant_namespace_ids())::integer[]));

ALTER TABLE kbctl.lexical_vocab ENABLE ROW LEVEL SECURITY;
ALTER TABLE kbctl.lexical_vocab FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON kbctl.lexical_vocab USING (namespace_id = ANY ((SELECT kbctl.tenant_namespace_ids())::integer[]));

ALTER TABLE kbctl.lexical_stats ENABLE ROW LEVEL SECURITY;
ALTER TABLE kbctl.lexical_stats FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON kbctl.lexical_stats USING (namespace_id = ANY ((SELECT kbctl.tenant_namespace_ids())::integer[]));

ALTER TABLE kbctl.runs ENABLE ROW LEVEL SECURITY;
ALTER TABLE kbctl.runs FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON kbctl.runs USING (namespace_id = ANY ((SELECT kbctl.tenant_namespace_ids())::integer[]));

ALTER TABLE kbctl.run_errors ENABLE ROW LEVEL SECURITY;
ALTER TABLE kbctl.run_errors FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON kbctl.run_errors USING (namespace_id = ANY ((SELECT kbctl.tenant_namespace_ids())::integer[]));

ALTER TABLE kbctl.feed_state ENABLE ROW LEVEL SECURITY;
ALTER TABLE kbctl.feed_state FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON kbctl.feed_state USING (namespace_id = ANY ((SELECT kbctl.tenant_namespace_ids())::integer[]));

ALTER TABLE kbctl.query_feedback ENABLE ROW LEVEL SECURITY;
ALTER TABLE kbctl.query_feedback FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON kbctl.query_feedback USING (namespace_id = ANY ((SELECT kbctl.tenant_namespace_ids())::integer[]));

-- What a tenant's role may do. Profiles are shared and written by the owner (a new profile also
-- gets its HNSW index, which only the owner may create); the ledger is the owner's.
GRANT USAGE ON SCHEMA kbctl TO kbctl_tenant;
GRANT SELECT ON kbctl.profiles, kbctl.tenants TO kbctl_tenant;
GRANT SELECT, INSERT, UPDATE, DELETE ON kbctl.namespaces, kbctl.documents, kbctl.chunks, kbctl.lexical_postings,
    kbctl.lexical_vocab, kbctl.lexical_stats, kbctl.runs, kbctl.run_errors, kbctl.feed_state, kbctl.search_audit,
    kbctl.agent_tokens, kbctl.query_log, kbctl.query_feedback TO kbctl_tenant;
GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA kbctl TO kbctl_tenant;
