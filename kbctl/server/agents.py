"""Agents and their scope: ``[agents.NAME]`` in the settings, resolved to an ``Agent``.

An agent sees only its namespaces and tools. Whatever lies outside (a namespace of another agent,
one that does not exist, a tool it was not given) gets the same answer, ``"… is not available"``,
so a request can never tell what exists outside its scope.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..config import AGENT_TOOLS, Settings
from ..errors import ConfigError, UsageError, echo
from ..ids import Ids
from ..types import Principal

__all__ = ["Agent", "TOOLS", "agent_from_settings", "unavailable", "UNSCOPED"]

TOOLS = AGENT_TOOLS  # the tools an [agents.NAME] table may name (checked when the settings are read)
UNSCOPED = "default"


def unavailable(kind: str, ident: Any) -> UsageError:
    """The one answer for what does not exist and what the agent may not reach (nothing tells them
    apart); what the agent sent is quoted cut (``kbctl.errors.echo``)."""
    return UsageError(f"{kind} {echo(ident)} is not available")


@dataclass(frozen=True)
class Agent:
    """What one agent may reach: namespaces and tools (empty: all), its defaults, tenant and principal."""

    name: str = UNSCOPED
    namespaces: tuple[str, ...] = ()
    tools: tuple[str, ...] = TOOLS
    k: int | None = None
    budget: int | None = None
    tenant: str | None = None
    principal: Principal | None = None
    made_for: Ids | None = None  # a token's: the ids of the tenant it was made for (``Service.kb``)

    def check_tool(self, tool: str) -> None:
        if tool not in self.tools:
            raise unavailable("tool", tool)

    def scope(self, requested: Sequence[str] | None, existing: Sequence[str]) -> list[str]:
        """The namespaces a request may search: those it names (each in scope and existing), else all in scope."""
        reachable = [n for n in existing if not self.namespaces or n in self.namespaces]
        if not requested:
            return reachable
        for n in requested:
            if n not in reachable:
                raise unavailable("namespace", n)
        return list(dict.fromkeys(requested))


def agent_from_settings(settings: Settings, name: str | None) -> Agent:
    """The agent ``[agents.NAME]`` (unscoped when ``name`` is None); an unknown name is a ConfigError."""
    if name is None:
        return Agent()
    table = settings.agents.get(name)
    if table is None:
        raise ConfigError(f"no agent {name!r} is configured", hint=f"add [agents.{name}] to kbctl.toml")
    tools = table.tools or TOOLS
    unknown = [t for t in tools if t not in TOOLS]
    if unknown:
        raise ConfigError(f"agents.{name}.tools: unknown tool {unknown[0]!r}", hint=f"tools: {', '.join(TOOLS)}")
    try:
        principal = Principal.parse(table.principal or None, table.groups)
    except ValueError as e:
        raise ConfigError(f"agents.{name}.principal: {e}") from None
    return Agent(
        name,
        table.namespaces,
        tools,
        table.k or None,
        table.budget or None,
        table.tenant or None,
        principal,
    )
