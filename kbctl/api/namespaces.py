"""``kb.namespaces``: list, create, bind and delete namespaces, the profile each is searched and
written with, and ``kb.namespaces["billing_kb"]`` (also ``kb["billing_kb"]``), a handle on one."""

from __future__ import annotations

from .. import validate
from ..config import Profile
from ..errors import ConfigError, UsageError
from ..store import (
    Namespace,
    delete_namespace,
    ensure_namespace,
    get_namespace,
    list_namespaces,
    rebind_namespace,
    tenants,
)
from ..store.namespaces import find_profile
from ..store.reading import namespace_names
from ._boundary import Part, psycopg_boundary
from .handle import NamespaceHandle

__all__ = ["Namespaces"]


@psycopg_boundary
class Namespaces(Part):
    """The tenant's namespaces (``kbctl namespaces``). Calling it lists them: ``kb.namespaces()``."""

    def __call__(self, all_tenants: bool = False) -> list[dict]:
        """This tenant's namespaces with their profile and counts; ``all_tenants``: every registered
        tenant's, each read as that tenant's role (on the owner's connection)."""
        if not all_tenants:
            return list_namespaces(self._conn(), self.tenant)
        with self.session.admin() as conn:
            rows = []
            for t in tenants.list_tenants(conn):
                with tenants.as_role(conn, t["role"]):
                    rows += list_namespaces(conn, t["name"])
            return rows

    def __getitem__(self, name: str) -> NamespaceHandle:
        """A handle on namespace ``name`` (it need not exist yet: ``kb["new_kb"].ingest(...)`` creates it)."""
        return NamespaceHandle(self.kb, name)

    def get(self, name: str) -> Namespace:
        """Namespace ``name`` as stored (a ``UsageError`` when there is none)."""
        return get_namespace(self._conn(), name, self.tenant)

    def names(self) -> list[str]:
        """This tenant's namespace names (without the counts ``namespaces()`` reads)."""
        return namespace_names(self._conn(), self.tenant)

    def create(self, name: str, profile: str | None = None, description: str = "") -> Namespace:
        """Create ``name`` pinned to a profile (or return it, when it exists with the same pin). The
        profile is looked up as a plan reads (``Session.planning``): a refusal (a profile not
        configured, a name no namespace can have) makes no tenant."""
        with self.session.planning():
            prof = self.profile_for(name, profile)
        self.session.writing()
        return ensure_namespace(self._conn(), name, self.tenant, prof, description)

    def bind(self, name: str, profile: str) -> Namespace:
        """Pin an existing namespace to another profile.

        Refused (``ConfigError``) when it holds vectors of another model or dimension: the new
        profile could not search them.
        """
        return rebind_namespace(self._conn(), name, self.tenant, self.settings.profile(profile))

    def delete(self, name: str) -> int:
        """Delete a namespace with its documents and chunks; returns how many documents it held."""
        return delete_namespace(self._conn(), name, self.tenant)

    # -- the profile a namespace is written and searched with --------------------------------------

    def profile_for(self, namespace: str, profile: str | None = None) -> Profile:
        """The profile to use with ``namespace``: explicit, declared in config, as stored, or the
        default. A name no namespace can have is refused first (``validate.name``), before a write
        that looks its profile up makes anything.

        Every write that may make a namespace asks it first, so a namespace declared for another
        tenant (``[namespaces.NAME] tenant``) is refused here: it is not made in, or written from,
        this one."""
        validate.name("namespace", namespace)
        declared_tenant = self.settings.namespaces[namespace].tenant if namespace in self.settings.namespaces else ""
        if declared_tenant and declared_tenant != self.tenant:
            raise ConfigError(
                f"namespace {namespace!r} is declared for tenant {declared_tenant!r} ([namespaces.{namespace}]"
                f" tenant), not {self.tenant!r}",
                hint=f"write it as its tenant: kbctl --tenant {declared_tenant} …, or change the declaration",
            )
        if profile:
            return self.settings.profile(profile)
        declared = self.settings.namespace_profile(namespace)
        if declared:
            return self.settings.profile(declared)
        ns = get_namespace(self._conn(), namespace, self.tenant, required=False)
        if ns is not None:
            if ns.profile_name not in self.settings.profile_names():
                raise ConfigError(
                    f"namespace {namespace!r} is pinned to profile {ns.profile_name!r}, which this configuration does not define",
                    hint=f"add [profiles.{ns.profile_name}] to kbctl.toml with model {ns.model!r}, dimension {ns.dimension}",
                )
            return self.settings.profile(ns.profile_name)
        return self.settings.profile()

    def search_profile(self, ns: Namespace, profile: str | None = None) -> Profile:
        """The profile a search of ``ns`` embeds its query with: explicit, else its active
        generation's (as read with ``ns``), else what ``profile_for`` finds."""
        if profile:
            return self.settings.profile(profile)
        if ns.profile_name in self.settings.profile_names():
            prof = self.settings.profile(ns.profile_name)
            if prof.fingerprint == ns.fingerprint:
                return prof
        if ns.generation_id:  # as recorded: a generation's profile needs no configuration to search it
            from ..ingest.reembed import stored_profile

            return stored_profile(self._conn(), ns.profile_id, self.settings.profile())
        return self.profile_for(ns.name)

    def at_generation(self, ns: Namespace, state: str) -> Namespace:
        """``ns`` as its ``state`` generation (shadow, previous) reads it; a ``UsageError`` when it has none."""
        from ..ingest import reembed as gen

        g = gen.generation_of(self._conn(), ns, state)
        if g is None:
            raise UsageError(
                f"namespace {ns.name!r} has no {state} generation",
                hint=f"see its generations: kbctl reembed {ns.name} --status",
            )
        return gen.as_generation(ns, g)

    def placeholder(self, name: str, prof: Profile) -> Namespace:
        """What an ingest plan reads for a namespace not created yet: the profile as recorded (the
        embed cache's vectors are looked up under its id, as the run's are; -1 when it is not), the
        storage and the analyzer version it will be created with."""
        pid = find_profile(self._conn(), prof.fingerprint)
        return Namespace(
            -1,
            self.tenant,
            name,
            -1 if pid is None else pid,
            prof.name,
            prof.fingerprint,
            prof.model,
            prof.dimension,
            prof.distance,
            storage=prof.storage,
        )
