"""The MCP face of the tools: an ``MCPServer`` (the official SDK) exposing one agent's tools.

``kbctl mcp`` runs it over stdio; ``kbctl serve`` mounts one per agent at ``/mcp`` (streamable
HTTP, stateless, JSON responses) and routes each request by its bearer token.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from .._version import __version__
from .tools import DESCRIPTIONS, Toolbox

__all__ = ["mcp_server"]

INSTRUCTIONS = (
    "kbctl answers from a private knowledge base. Call list_namespaces to see the collections, "
    "search_knowledge to find passages with citations (cite them), verify_claim to check a statement "
    "against the sources, research_topic for a broad overview, get_document to read around a passage."
)


def mcp_server(toolbox: Toolbox) -> MCPServer:
    """An MCP server with the tools ``toolbox.agent`` may call (and only those)."""
    server: MCPServer = MCPServer("kbctl", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")
    for name in toolbox.agent.tools:
        server.add_tool(getattr(toolbox, name), name=name, description=DESCRIPTIONS[name], structured_output=False)
    return server
