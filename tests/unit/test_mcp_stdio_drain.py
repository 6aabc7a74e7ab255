"""``kbctl.server.mcp.answered_before_eof``: the end of a transport's input reaches the MCP server
only once the requests read before it are answered, or cancelled by the client, or the drain's
bound has passed (a request that never ends does not hold ``kbctl mcp`` open)."""

from __future__ import annotations

import time

import anyio
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

from kbctl.server.mcp import answered_before_eof


def _request(i: int) -> SessionMessage:
    return SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=i, method="tools/call", params={"name": "x"}))


def _cancelled(i: int) -> SessionMessage:
    return SessionMessage(JSONRPCNotification(jsonrpc="2.0", method="notifications/cancelled", params={"requestId": i}))


def _serve(items: list[SessionMessage], answer, drain: float) -> tuple[list, float, float]:
    """Feed ``items`` then EOF through ``answered_before_eof`` to a server that answers request i
    after ``answer(i)`` seconds (never when None); what was written, when the server saw EOF, and
    when the whole ended (seconds from the start)."""

    async def main():
        send_in, read_stream = anyio.create_memory_object_stream(10)
        write_stream, written_out = anyio.create_memory_object_stream(10)
        for item in items:
            send_in.send_nowait(item)
        send_in.close()  # EOF right after the requests
        t0, eof = time.monotonic(), None
        async with (
            answered_before_eof(read_stream, write_stream, drain) as (requests, answers),
            anyio.create_task_group() as tg,
            answers,
        ):

            async def handle(i):
                await anyio.sleep(answer(i))
                await answers.send(SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=i, result={})))

            async for item in requests:
                if isinstance(item.message, JSONRPCRequest) and answer(item.message.id) is not None:
                    tg.start_soon(handle, item.message.id)
            eof = time.monotonic() - t0
            tg.cancel_scope.cancel()  # as the SDK's loop does at EOF
        took = time.monotonic() - t0
        return [m.message.id async for m in written_out], eof, took  # the relay closed its end

    return anyio.run(main)


def test_eof_reaches_the_server_once_every_request_is_answered():
    written, eof, _ = _serve([_request(1), _request(2), _request(3)], lambda i: 0.05 * i, drain=10)
    assert sorted(written) == [1, 2, 3] and eof >= 0.15


def test_a_request_the_client_cancelled_is_not_waited_for():
    written, _, took = _serve([_request(1), _request(2), _cancelled(2)], lambda i: 0.05 if i == 1 else None, 10)
    assert written == [1] and took < 5


def test_the_wait_is_bounded_by_the_drain():
    written, eof, took = _serve([_request(1), _request(2)], lambda i: 0.05 if i == 1 else None, drain=0.5)
    assert written == [1] and 0.5 <= eof < 3 and took < 3
