"""The test servers themselves: a port a test picked, released and handed to ``kbctl serve`` could
be taken in between by another process (CI runs many), and the server then failed to bind. They
start on ``--port 0`` and read the port off the line the server prints once it listens."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import httpx
import pytest

from .conftest import start_server, stop, wait_listening


def test_a_test_server_starts_when_another_process_took_its_port(served):
    with socket.socket() as taken:  # the port a pick released, taken by another process before the start
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        run = start_server(served.home, served.tenant, served.config)
        try:
            assert run.port not in (0, taken.getsockname()[1])
            assert run.url == f"http://127.0.0.1:{run.port}"
            assert httpx.get(run.url + "/healthz", timeout=10).status_code == 200
        finally:
            stop(run.proc)
        assert run.proc.returncode == 0, run.stderr()[-2000:]


@pytest.mark.parametrize(
    ("code", "said"),
    [
        ("import sys, time; print('warming up', file=sys.stderr, flush=True); time.sleep(60)", "did not say"),
        ("import sys; print('error: no such tenant', file=sys.stderr); sys.exit(2)", "exited 2 before it listened"),
    ],
)
def test_a_server_that_never_listens_fails_with_its_stderr(tmp_path, code, said):
    """A server that exits, or says nothing within the timeout, fails the start with what it wrote
    (and a silent one is killed): never a wait for ever, nor a message without the server's words."""
    log = tmp_path / "stderr"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-c", code], stderr=out)
    started = time.monotonic()
    try:
        with pytest.raises(RuntimeError) as caught:
            wait_listening(proc, log.read_text, timeout=10)
    finally:
        proc.kill()
        proc.wait()
    assert said in str(caught.value)
    assert ("warming up" if "time" in code else "error: no such tenant") in str(caught.value)
    assert time.monotonic() - started < 30
