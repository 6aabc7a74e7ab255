"""``kb.agents``: what the agent surface stores: bearer tokens of ``[agents.NAME]``, the query log
(``[server] log_queries``) and the feedback agents give on it."""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from pathlib import Path

from .. import validate
from ..errors import ConfigError, UsageError
from ..ids import Ids
from ..store import agents as store
from ..store import get_namespace, namespace_ids
from ..types import SearchResult, store_id
from ._boundary import Part, psycopg_boundary, unavailable

__all__ = ["Agents"]


@psycopg_boundary
class Agents(Part):
    """Agents' tokens, logged queries and feedback (``kbctl agents``, ``kbctl eval import-feedback``)."""

    def __call__(self) -> list[dict]:
        """The configured agents (``[agents.NAME]``) by name, each with the tenant it searches (its
        own ``tenant``, else this one), its namespaces and tools (empty: all) and how many valid
        tokens it holds there; then the agents no longer configured that still hold a valid token
        in this tenant (``configured`` false: their tokens still open the store). Read as the login."""
        agents = self.settings.agents
        where = {name: a.tenant or self.tenant for name, a in agents.items()}
        with self.session.admin() as conn:
            live = store.live_tokens(conn, sorted({self.tenant, *where.values()}))
        rows = [
            {
                "agent": name,
                "tenant": where[name],
                "namespaces": list(a.namespaces),
                "tools": list(a.tools),
                "tokens": live.get((where[name], name), 0),
                "configured": True,
            }
            for name, a in sorted(agents.items())
        ]
        gone = sorted(a for (t, a) in live if t == self.tenant and a not in agents)
        rows += [
            {
                "agent": a,
                "tenant": self.tenant,
                "namespaces": [],
                "tools": [],
                "tokens": live[(self.tenant, a)],
                "configured": False,
            }
            for a in gone
        ]
        return rows

    def create_token(self, agent: str) -> str:
        """A new bearer token for ``[agents.AGENT]`` (stored hashed: it is shown only now), of this
        tenant; an agent pinned to another tenant (``[agents.AGENT] tenant``) gets its tokens there
        (the server serves a token only the tenant it was made under)."""
        if agent not in self.settings.agents:
            raise ConfigError(f"no agent {agent!r} is configured", hint=f"add [agents.{agent}] to kbctl.toml")
        pinned = self.settings.agents[agent].tenant
        if pinned and pinned != self.tenant:
            raise ConfigError(
                f"agent {agent!r} searches tenant {pinned!r} ([agents.{agent}] tenant), not {self.tenant!r}",
                hint=f"make its token there: kbctl --tenant {pinned} agents token create {agent}",
            )
        token = "kb_" + secrets.token_urlsafe(32)
        store.create_token(self._conn(), self.tenant, agent, token)
        return token

    def revoke_tokens(self, agent: str) -> int:
        """Revoke every token of ``agent``; how many were valid. A name that is neither configured
        nor had a valid token is a ``UsageError`` (a typo in an incident's revoke is not "0 revoked"),
        and so is an agent pinned to another tenant (``[agents.AGENT] tenant``) with none here: its
        tokens are there. An agent removed from the config keeps its tokens revocable."""
        n = store.revoke_tokens(self._conn(), self.tenant, agent)
        table = self.settings.agents.get(agent)
        if n == 0 and table is not None and table.tenant and table.tenant != self.tenant:
            # its tokens are made (and served) in the tenant it is pinned to: "revoked 0" here would
            # leave them working while the operator believes them gone
            raise UsageError(
                f"agent {agent!r} searches tenant {table.tenant!r} ([agents.{agent}] tenant): its tokens"
                f" are there, not in {self.tenant!r}",
                hint=f"revoke them there: kbctl --tenant {table.tenant} agents token revoke {agent}",
            )
        if n == 0 and agent not in self.settings.agents:
            known = ", ".join(sorted(self.settings.agents)) or "none"
            raise UsageError(
                f"no agent {agent!r} is configured, and it has no valid token in tenant {self.tenant!r}",
                hint=f"configured agents: {known} ([agents.NAME] in kbctl.toml)",
            )
        return n

    def of_token(self, token: str) -> tuple[str, str] | None:
        """(tenant, agent) of a valid bearer token, of any tenant, else None. Looked up as the login
        (``Session.owner_connection``), never as this tenant's role: the lookup reads no tenant's
        rows but the one token's (a definer's function), and it still answers when this tenant was
        deleted (a server whose own tenant was deleted serves the others' agents)."""
        found = self.holder_of_token(token)
        return None if found is None else (found[0], found[1])

    def holder_of_token(self, token: str) -> tuple[str, str, Ids] | None:
        """``of_token`` with the opaque ids of the token's tenant (``kbctl.ids``), read in the same
        statement: which tenant of the name the token was made for. A tenant deleted and made again
        under its name has a new key, so a server that remembers a token's lookup tells a borrow of
        the new tenant from one of the tenant the token was made for (``kbctl.server.service``)."""
        found = store.agent_of_token(self.session.owner_connection(), token)
        return None if found is None else (found[0], found[1], Ids(found[2]))

    def log_query(
        self, agent: str, tool: str, result: SearchResult, shown: Sequence[tuple[str, int]] | None = None
    ) -> int:
        """Log a query of ``agent`` and the documents it returned (``[server] log_queries``); its id.
        ``shown``: the (namespace, doc_id) pairs the answer showed, when not every hit (a budgeted
        context, research's documents): only those can be judged."""
        conn = self._conn()
        ids = {n: get_namespace(conn, n, self.tenant).id for n in result.namespaces}
        pairs = shown if shown is not None else [(h.namespace, store_id(h.doc_id)) for h in result.hits]
        docs = list(dict.fromkeys((ids[n], d) for n, d in pairs if n in ids))
        return store.log_query(conn, self.tenant, agent, tool, list(ids.values()), result.query, docs)

    def record_feedback(self, agent: str, query_id: int, doc_id: int, useful: bool) -> None:
        """Judge a document a logged query of ``agent`` returned; any other pair is not available."""
        logged = store.logged_query(self._conn(), int(query_id), self.tenant, agent)
        if logged is None:
            raise unavailable("query", query_id)
        # a namespace the query searched may have been deleted since (its judgments went with it)
        live = set(namespace_ids(self._conn(), self.tenant))
        owners = [ns for ns, d in logged[1] if d == int(doc_id) and ns in live]
        if not owners:
            raise unavailable("document", doc_id)
        store.record_feedback(self._conn(), int(query_id), owners[0], int(doc_id), bool(useful))

    def import_feedback(self, namespace: str, path: str | Path) -> int:
        """Write the judged queries over ``namespace`` as a golden JSONL eval dataset (``kbctl eval
        run`` reads it); how many queries. A query with no useful document is left out. ``path`` is
        checked before the store is read (``validate.output_file``)."""
        out = validate.output_file("path", path)
        queries: dict[int, dict] = {}
        for qid, text, uri, useful in store.judged_queries(self._conn(), self.kb.namespaces.get(namespace).id):
            q = queries.setdefault(qid, {"id": f"fb{qid}", "query": text, "namespace": namespace, "relevant": {}})
            q["relevant"][uri] = 1 if useful else 0
        keep = [q for q in queries.values() if any(g > 0 for g in q["relevant"].values())]
        out.write_text("".join(json.dumps(q, sort_keys=True) + "\n" for q in keep))
        return len(keep)
