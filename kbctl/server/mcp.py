"""The MCP face of the tools: an ``MCPServer`` (the official SDK) exposing one agent's tools,
its documents as resources and two prompts.

``kbctl mcp`` runs it over stdio; ``kbctl serve`` mounts one per agent at ``/mcp`` (streamable
HTTP, stateless, JSON responses) and routes each request by its bearer token. The SDK serves both
protocol eras on each transport: the stateless 2026-07-28 revision (``server/discover``, a
per-request ``_meta`` envelope, no session) and the ``initialize`` handshake of 2025-11-25 and
before (``SUPPORTED_REVISIONS``).

Every tool declares its output schema (``kbctl.server.schemas``) and answers with
``structuredContent`` and the same JSON as text. A cited document or chunk is a resource,
``kbctl://<namespace>/<doc_id>[#<chunk_id>]`` (template ``RESOURCE_TEMPLATE``; the ids opaque, as
every id a tool gives out: ``kbctl.ids``), read within the
agent's scope and its principal's ACL, for an agent that may call ``get_document``. The lists
(tools, templates, prompts) are cacheable for a minute, privately: they depend on the token.

A tool's error reaches the client as a tool result with ``isError`` and the same one-line reason
the JSON API gives (``invalid arguments: k: …``, ``namespace 'x' is not available``, ``k must be at
most 100, got 500``). A refusal is logged at INFO without a traceback; a fault (anything but a
usage or configuration error) is logged once with its traceback. A resource or prompt refused
is a JSON-RPC error (``-32602``) with that message, logged the same way.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import typing
from typing import Any, AsyncIterator

import anyio
import pydantic_core
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.caching import CacheHint
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedResourceError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolResult,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    TextContent,
)
from mcp_types import ResourceTemplate as MCPResourceTemplate
from mcp_types.methods import CacheableMethod
from mcp_types.version import LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION
from pydantic import ValidationError, validate_call

from .._version import __version__
from ..errors import KbctlError, cut
from .agents import unavailable
from .faults import error_status, public_fault, validation_message
from .schemas import RESOURCE_SCHEME, RESOURCE_TEMPLATE
from .tools import DESCRIPTIONS, Toolbox

__all__ = ["mcp_server", "SUPPORTED_REVISIONS", "RESOURCE_TEMPLATE"]

SUPPORTED_REVISIONS = (LATEST_MODERN_VERSION, LATEST_HANDSHAKE_VERSION)
"""The revisions kbctl is tested with: the current one (stateless) and the previous (handshake)."""

_LIST_CACHE = CacheHint(ttl_ms=60_000, scope="private")  # an agent's lists: its token's, not to share

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "kbctl answers from a private knowledge base. Call list_namespaces to see the collections, "
    "search_knowledge to find passages with citations (cite them), verify_claim to check a statement "
    "against the sources, research_topic for a broad overview, get_document to read around a passage."
)


class _KbctlMCP(MCPServer):
    """An ``MCPServer`` whose tool errors say why, as the JSON API does."""

    tool_names: tuple[str, ...] = ()
    toolbox: Toolbox | None = None

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        if name not in self.tool_names:
            return _refused(name, str(unavailable("tool", name)))
        if self.toolbox is not None and _sent_otherwise(getattr(self.toolbox, name), arguments):
            return await self._call_as_sent(name, arguments)
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as e:
            cause = e.__cause__
            if not isinstance(cause, KbctlError):
                raise  # a fault: the SDK logs its traceback (once) and tells the client only the tool's name
            if error_status(cause) >= 500:
                log.error("tool %s failed: %s", name, cause.message, exc_info=cause)
                return _error_result(public_fault(cause, name))
            return _refused(name, cause.message)
        except ToolError as e:
            if isinstance(e.__cause__, ValidationError):
                return _refused(name, validation_message(e.__cause__))
            raise

    async def run_stdio_async(self) -> None:
        """Serve stdin/stdout until stdin closes, then answer the requests still in flight before
        returning (``answered_before_eof``, within ``[server] drain_seconds``). The SDK's loop
        cancels them at EOF, so a client that writes its requests and closes stdin at once
        (``printf … | kbctl mcp``) got the answers of ``initialize`` and ``tools/list`` only."""
        from mcp.server.stdio import stdio_server

        drain = self.toolbox.limits.drain_seconds if self.toolbox is not None else 0
        lowlevel = self._lowlevel_server
        async with (
            stdio_server() as (read_stream, write_stream),
            answered_before_eof(read_stream, write_stream, drain) as (requests, answers),
        ):
            await lowlevel.run(requests, answers, lowlevel.create_initialization_options())

    async def _call_as_sent(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        """Tool ``name`` called with ``arguments`` as they were sent, as the JSON API calls it
        (``validate_call``): the SDK would have read a string argument as JSON, or dropped an
        argument the tool does not take (``_sent_otherwise``)."""
        assert self.toolbox is not None
        fn = getattr(self.toolbox, name)
        try:
            result = await anyio.to_thread.run_sync(lambda: validate_call(fn)(**arguments))
        except ValidationError as e:
            return _refused(name, validation_message(e))
        except KbctlError as e:
            if error_status(e) >= 500:
                log.error("tool %s failed: %s", name, e.message, exc_info=e)
                return _error_result(public_fault(e, name))
            return _refused(name, e.message)
        text = pydantic_core.to_json(result, fallback=str, indent=2).decode()
        return CallToolResult(
            content=[TextContent(type="text", text=text)],
            structured_content=result.model_dump(mode="json", by_alias=True),
        )

    async def read_resource(self, uri: Any, context: Any = None) -> Any:
        if self.toolbox is None or not str(uri).startswith(f"{RESOURCE_SCHEME}:"):
            return await super().read_resource(uri, context)
        try:
            text, meta = await anyio.to_thread.run_sync(self.toolbox.read_resource, str(uri))
        except KbctlError as e:
            if error_status(e) >= 500:  # a fault: the SDK logs its traceback (once), the client sees no internals
                raise UnexpectedResourceError(f"Error reading resource {cut(str(uri))}") from e
            raise _refusal("resource", cut(str(uri)), e.message) from None
        except Exception as e:  # a fault: the SDK logs its traceback once, the client sees no internals
            raise UnexpectedResourceError(f"Error reading resource {cut(str(uri))}") from e
        return [ReadResourceContents(content=text, mime_type="text/markdown", meta=meta)]

    async def list_resource_templates(self) -> list[MCPResourceTemplate]:
        if self.toolbox is None or "get_document" not in self.toolbox.agent.tools:
            return []
        return [
            MCPResourceTemplate(
                uri_template=RESOURCE_TEMPLATE,
                name="document",
                title="A document or one of its chunks",
                description=(
                    "A document of a namespace this agent may read (kbctl://<namespace>/<doc_id>), or one chunk "
                    "of it (#<chunk_id>): search results link them in `resource`. The ids are opaque strings."
                ),
                mime_type="text/markdown",
            )
        ]

    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None, context: Any = None) -> Any:
        prompt = self._prompt_manager.get_prompt(name)
        if prompt is None:
            raise _refusal("prompt", cut(name), str(unavailable("prompt", name)))
        missing = sorted({a.name for a in prompt.arguments or [] if a.required} - set(arguments or {}))
        if missing:
            raise _refusal("prompt", cut(name), f"invalid arguments: {missing[0]}: Field required")
        return await super().get_prompt(name, arguments, context)


def _sent_otherwise(fn: Any, arguments: dict[str, Any]) -> bool:
    """Whether the SDK would call tool ``fn`` otherwise than with ``arguments`` as sent: it drops an
    argument the tool does not take (a misspelled ``filter`` would search unfiltered, where the JSON
    API refuses it), or reads a string as JSON (``_read_as_json``)."""
    return bool(set(arguments) - set(inspect.signature(fn).parameters)) or _read_as_json(fn, arguments)


def _read_as_json(fn: Any, arguments: dict[str, Any]) -> bool:
    """Whether the SDK would change a string argument before the tool sees it: it reads a string
    given to a parameter not typed plain ``str`` as JSON, and keeps what that gives unless it is a
    string or a number (``FuncMetadata.pre_parse_json``, for clients that send a list as its JSON
    text). For a parameter typed ``str | None`` (a cursor, a chunk id), ``"null"`` became None (the
    argument left out) and ``"[1]"`` a list: such an argument is the string the agent sent."""
    params = inspect.signature(fn).parameters
    for key, value in arguments.items():
        param = params.get(key)
        if param is None or not isinstance(value, str) or not _text_or_none(param.annotation):
            continue
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            continue
        if not isinstance(parsed, (str, int, float)):
            return True
    return False


def _text_or_none(annotation: Any) -> bool:
    """``str | None`` (also within ``Annotated``): a string the SDK may read as JSON."""
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation is not str and str in typing.get_args(annotation)


def _refused(tool: str, message: str) -> CallToolResult:
    log.info("tool %s refused: %s", cut(tool), message)
    return _error_result(message)


def _refusal(kind: str, name: str, message: str) -> MCPError:
    """A refused resource read or prompt: logged at INFO (no traceback), the message for the client."""
    log.info("%s %s refused: %s", kind, name, message)
    return MCPError(code=INVALID_PARAMS, message=message)


def _error_result(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


@contextlib.asynccontextmanager
async def answered_before_eof(
    read_stream: Any, write_stream: Any, drain_seconds: float
) -> AsyncIterator[tuple[MemoryObjectReceiveStream[Any], MemoryObjectSendStream[Any]]]:
    """A server's streams over a transport's (``read_stream``, ``write_stream``) that hold back the
    transport's end of input until every request read before it has its answer written (an error
    or a cancellation by the client counts), or ``drain_seconds`` have passed: the server's loop
    then sees the end, with nothing (or only what outlived the wait) still in flight."""
    requests_in, requests = anyio.create_memory_object_stream[Any](0)
    answers, answers_out = anyio.create_memory_object_stream[Any](0)
    pending: set[Any] = set()  # the ids of the requests read and not answered yet
    settled = anyio.Event()

    def done(request_id: Any) -> None:
        nonlocal settled
        pending.discard(request_id)
        if not pending:
            settled.set()
            settled = anyio.Event()

    async def relay_requests() -> None:
        async with requests_in:
            async for item in read_stream:
                message = getattr(item, "message", None)
                if isinstance(message, JSONRPCRequest):
                    pending.add(message.id)
                elif isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
                    done((message.params or {}).get("requestId"))  # never answered, as the protocol says
                await requests_in.send(item)
            with anyio.move_on_after(drain_seconds):
                while pending:
                    await settled.wait()
            if pending:
                log.warning("stdin closed: %d request(s) unanswered after %s s", len(pending), drain_seconds)

    async def relay_answers() -> None:
        async with answers_out, write_stream:
            async for item in answers_out:
                await write_stream.send(item)
                if isinstance(item.message, (JSONRPCResponse, JSONRPCError)):
                    done(item.message.id)

    async with anyio.create_task_group() as tg:
        tg.start_soon(relay_answers)
        async with anyio.create_task_group() as reading:
            reading.start_soon(relay_requests)
            yield requests, answers
            reading.cancel_scope.cancel()  # the server is done: whatever stdin still holds is not read
        await answers.aclose()  # the server closed it; if not, relay_answers still writes what it sent


def mcp_server(toolbox: Toolbox) -> MCPServer:
    """An MCP server with the tools ``toolbox.agent`` may call (and only those), each with its output
    schema; the resource template when it may call get_document; the prompts of the tools it has."""
    lists: tuple[CacheableMethod, ...] = ("tools/list", "resources/templates/list", "prompts/list")
    server = _KbctlMCP(
        "kbctl",
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",
        cache_hints={m: _LIST_CACHE for m in lists},
    )
    server.tool_names = tuple(toolbox.agent.tools)
    server.toolbox = toolbox
    for name in toolbox.agent.tools:
        server.add_tool(getattr(toolbox, name), name=name, description=DESCRIPTIONS[name], structured_output=True)
    _add_prompts(server, toolbox)
    return server


def _add_prompts(server: MCPServer, toolbox: Toolbox) -> None:
    """``answer_with_citations`` (with search_knowledge) and ``check_claim`` (with verify_claim)."""

    def namespaces_of(names: str | None) -> list[str]:
        """The namespaces a prompt names (comma-separated), each checked against the agent's scope."""
        requested = [n.strip() for n in (names or "").split(",") if n.strip()]
        try:
            return toolbox.namespaces_in_scope(requested)
        except KbctlError as e:
            raise _refusal("prompt", "namespaces", e.message) from None

    tools = toolbox.agent.tools
    if "search_knowledge" in tools:

        @server.prompt(
            name="answer_with_citations",
            title="Answer with citations",
            description="Answer a question from the knowledge base, citing every claim (namespaces: comma-separated).",
        )
        async def answer_with_citations(question: str, namespaces: str | None = None) -> str:
            scope = await anyio.to_thread.run_sync(namespaces_of, namespaces)
            reading = (
                " Open a cited document with resources/read on its `resource` link when a passage is not enough."
                if "get_document" in tools
                else ""
            )
            return (
                f"Answer this question using only the knowledge base: {question}\n\n"
                f"Call search_knowledge with namespaces {scope} (several queries if the question has parts). "
                "Cite each claim with the passage's number and its `citation`, and list the sources at the end. "
                "If the passages do not answer the question, say so instead of guessing." + reading
            )

    if "verify_claim" in tools:

        @server.prompt(
            name="check_claim",
            title="Check a claim",
            description="Check a statement against the sources and say what they show (namespaces: comma-separated).",
        )
        async def check_claim(claim: str, namespaces: str | None = None) -> str:
            scope = await anyio.to_thread.run_sync(namespaces_of, namespaces)
            return (
                f"Check this claim against the knowledge base: {claim}\n\n"
                f"Call verify_claim with namespaces {scope}, read the evidence passages (whether they support or "
                "contradict it) and answer: supported, contradicted or not found, citing the passages. "
                "`evidence_found` false means no passage is about it, not that the claim is false."
            )
