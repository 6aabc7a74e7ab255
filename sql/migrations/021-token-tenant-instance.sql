-- A bearer token names the tenant it was made for, not only the tenant's name.
--
-- A tenant deleted and made again under its name (`kbctl tenants delete T`, `kbctl tenants create
-- T`) is a new tenant: a new row here, a new role and id key, an empty store. A token's row named
-- its tenant by name alone, so a token that outlived T's delete (made while the delete ran, before
-- session 41 closed that race) authenticated on the new T. Each registration of a tenant now has its
-- own number (`instance`, never reused), each token the number of the registration it was made for
-- (`tenant_instance`, set by agents/create_token from the tenant's row, read under its lock), and the
-- token lookup and the borrow's check (agents/id_key_with_token) find only a token of the tenant
-- registered now. A token goes with the registration it names (ON DELETE CASCADE): no token of a
-- deleted tenant can be left for the next one of its name.
ALTER TABLE kbctl.tenants ADD COLUMN instance bigint GENERATED ALWAYS AS IDENTITY;
ALTER TABLE kbctl.tenants ADD CONSTRAINT tenants_instance_key UNIQUE (instance);
ALTER TABLE kbctl.agent_tokens
    ADD COLUMN tenant_instance bigint REFERENCES kbctl.tenants (instance) ON DELETE CASCADE;

-- The tokens already here, linked where the tenant they were made for is known:
-- - a token made at or after its tenant's registration is that tenant's: a token is made on a
--   connection acting as its tenant's role, which a registered tenant alone has, in a transaction
--   begun after the registration committed (the connections are autocommit);
-- - a token older than the registry is its tenant's when 009 registered that tenant from the data
--   then present (the tenant's created_at is then 009's, one transaction with its ledger row);
-- - any other token older than its tenant's registration was made for a tenant of that name that
--   was deleted since (it slipped through the old delete race): it stays unlinked, and unlinked
--   tokens are refused. So is a token whose tenant is not registered at all.
UPDATE kbctl.agent_tokens a SET tenant_instance = t.instance
FROM kbctl.tenants t
WHERE t.name = a.tenant
  AND (a.created_at >= t.created_at
       OR t.created_at = (SELECT m.applied_at FROM kbctl.schema_migrations m WHERE m.version = 9));

-- The definer's lookup (migration 009), now of a token of the tenant registered now only. The same
-- signature and columns; run as the login by kbctl (agents/agent_of_token).
CREATE OR REPLACE FUNCTION kbctl.agent_of_token(hash text) RETURNS TABLE (tenant text, agent text)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT a.tenant, a.agent
    FROM kbctl.agent_tokens a
    JOIN kbctl.tenants t ON t.instance = a.tenant_instance AND t.name = a.tenant
    WHERE a.token_hash = hash AND a.revoked_at IS NULL
$$;
