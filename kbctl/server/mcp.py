"""The MCP face of the tools: an ``MCPServer`` (the official SDK) exposing one agent's tools.

``kbctl mcp`` runs it over stdio; ``kbctl serve`` mounts one per agent at ``/mcp`` (streamable
HTTP, stateless, JSON responses) and routes each request by its bearer token.

A tool's error reaches the client as a tool result with ``isError`` and the same one-line reason
the JSON API gives (``invalid arguments: k: …``, ``namespace 'x' is not available``, ``k must be at
most 100, got 500``). A refusal is logged at INFO without a traceback; a fault (anything but a
usage or configuration error) is logged once with its traceback.
"""

from __future__ import annotations

import logging
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp_types import CallToolResult, TextContent
from pydantic import ValidationError

from .._version import __version__
from ..errors import KbctlError
from .agents import unavailable
from .tools import DESCRIPTIONS, Toolbox, error_status, validation_message

__all__ = ["mcp_server"]

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "kbctl answers from a private knowledge base. Call list_namespaces to see the collections, "
    "search_knowledge to find passages with citations (cite them), verify_claim to check a statement "
    "against the sources, research_topic for a broad overview, get_document to read around a passage."
)


class _KbctlMCP(MCPServer):
    """An ``MCPServer`` whose tool errors say why, as the JSON API does."""

    tool_names: tuple[str, ...] = ()

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        if name not in self.tool_names:
            return _refused(name, str(unavailable("tool", name)))
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as e:
            cause = e.__cause__
            if not isinstance(cause, KbctlError):
                raise  # a fault: the SDK logs its traceback (once) and tells the client only the tool's name
            if error_status(cause) >= 500:
                log.error("tool %s failed: %s", name, cause.message, exc_info=cause)
                return _error_result(cause.message)
            return _refused(name, cause.message)
        except ToolError as e:
            if isinstance(e.__cause__, ValidationError):
                return _refused(name, validation_message(e.__cause__))
            raise


def _refused(tool: str, message: str) -> CallToolResult:
    log.info("tool %s refused: %s", tool, message)
    return _error_result(message)


def _error_result(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def mcp_server(toolbox: Toolbox) -> MCPServer:
    """An MCP server with the tools ``toolbox.agent`` may call (and only those)."""
    server = _KbctlMCP("kbctl", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")
    server.tool_names = tuple(toolbox.agent.tools)
    for name in toolbox.agent.tools:
        server.add_tool(getattr(toolbox, name), name=name, description=DESCRIPTIONS[name], structured_output=False)
    return server
