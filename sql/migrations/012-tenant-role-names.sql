-- Tenant roles no two tenants can share.
--
-- Migration 009 named a tenant's role kbctl_t_<name> for a name of up to 55 bytes, else
-- kbctl_t_<first 38 characters>_<16 hex digits of md5(name)>. That long form is itself a valid
-- 55-byte tenant name's short form: a tenant named `<first 38>_<16 hex>` got the long-named
-- tenant's role (and `kbctl tenants create` failed on the registry's unique role with a hint
-- about concurrent writers). Now the long form is kbctl_t_<first 30 characters>+<24 hex digits
-- of md5(name)> (63 bytes): `+` is in no tenant name, so no long form is ever a short one, and
-- two long names with the same first 30 characters are told apart by 96 bits of hash.
--
-- Upgrade: each registered tenant whose role is not the new function's is moved to it. The role
-- is renamed (its grants, memberships and the owner's SET privilege follow a rename); when it is
-- gone, or another database of the server already renamed it (roles are cluster-wide), the
-- registry row is pointed at the new name and the role made if missing. Idempotent.

CREATE OR REPLACE FUNCTION kbctl.tenant_role(tenant text) RETURNS name LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN octet_length(tenant) <= 55 THEN 'kbctl_t_' || tenant
                ELSE 'kbctl_t_' || left(tenant, 30) || '+' || left(md5(tenant), 24) END::name
$$;

-- As in 009, and a role another registered tenant holds is refused in words (it cannot happen
-- with the names above short of an md5 collision; the registry's unique role is the last guard).
CREATE OR REPLACE FUNCTION kbctl.create_tenant(tenant text) RETURNS name LANGUAGE plpgsql
AS $$
DECLARE
    r name := kbctl.tenant_role(tenant);
    other text := (SELECT name FROM kbctl.tenants WHERE role = r AND name <> tenant);
BEGIN
    IF other IS NOT NULL THEN
        RAISE EXCEPTION 'tenant % would share the role % of tenant %; rename one of them', tenant, r, other;
    END IF;
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

DO $$
DECLARE
    t record;
    r name;
BEGIN
    FOR t IN SELECT name, role FROM kbctl.tenants WHERE role <> kbctl.tenant_role(name) ORDER BY name LOOP
        r := kbctl.tenant_role(t.name);
        IF EXISTS (SELECT FROM pg_roles WHERE rolname = t.role)
           AND NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN
            EXECUTE format('ALTER ROLE %I RENAME TO %I', t.role, r);
        END IF;
        UPDATE kbctl.tenants SET role = r WHERE name = t.name;
        PERFORM kbctl.create_tenant(t.name);  -- the role (if it was gone) and the owner's SET on it
    END LOOP;
END
$$;
