"""A running ``kbctl serve`` (a real process on 127.0.0.1) over two namespaces, with agents.

``billing`` may reach only ``billing_kb``; ``reader`` only search_knowledge and list_namespaces;
``ops`` everything. The namespaces use the hash-384 profile (no model is loaded).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from tests.conftest import ROOT, SAMPLE

CONFIG = """
[defaults]
profile = "hash-384"

[server]
log_queries = true
max_query_chars = 500
max_k = 50
max_budget = 6000
max_body_bytes = 8192
drain_seconds = 15

[agents.billing]
namespaces = ["billing_kb"]
k = 5

[agents.reader]
tools = ["search_knowledge", "list_namespaces"]

[agents.ops]
"""


@dataclass
class Server:
    url: str
    config: Path
    home: Path
    tenant: str
    proc: subprocess.Popen
    tokens: dict[str, str]

    def headers(self, agent: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[agent]}"}


def tenant_pair(tmp_path: Path, tenant: str, agents: Callable[[str], str]) -> tuple[str, Path, Path]:
    """For an in-process server of ``tenant`` and a second tenant: that tenant's name, a config (the
    hash-384 profile, then the ``[agents.…]`` tables ``agents`` gives for the second tenant's name)
    and a folder of one document (a ledger of "quorvax") to ingest."""
    other = f"{tenant}_b"[:60]
    config = tmp_path / "kbctl.toml"
    config.write_text(f'[defaults]\nprofile = "hash-384"\n{agents(other)}')
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Ledger\n\nthe quorvax ledger of a tenant\n")
    return other, config, docs


def app_for(kb_home: Path, config: Path, tenant: str, **server):
    """The server's app (not started: a ``TestClient`` runs it) for ``tenant``, with ``[server]``
    keys overridden by ``server``."""
    from kbctl.config import load_settings
    from kbctl.server.app import create_app

    dsn = {k: v for k, v in os.environ.items() if k == "KBCTL_DSN"}  # make test-dsn: that server, as the kbs above
    overrides = {"database.home": str(kb_home), "defaults.tenant": tenant}
    overrides.update({f"server.{k}": v for k, v in server.items()})
    return create_app(load_settings(config, overrides=overrides, env=dsn), warm=False)


def free_port() -> int:
    """A port nothing listens on now (a URL that must not answer). Never a port to start a server
    on: released here, another process can take it before the server binds it (start_server)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_for(home: Path, tenant: str, config: Path) -> dict[str, str]:
    return dict(
        os.environ, KBCTL_HOME=str(home), KBCTL_TENANT=tenant, KBCTL_CONFIG=str(config), PYTHONWARNINGS="ignore"
    )


LISTENING = re.compile(r"^listening on (http://\S+:(\d+))[ \t]*$", re.MULTILINE)


@dataclass
class Running:
    """A ``kbctl serve`` started on ``--port 0``: the URL and port its line said, its stderr so far."""

    proc: subprocess.Popen
    url: str
    port: int
    stderr: Callable[[], str]


def wait_listening(proc: subprocess.Popen, stderr: Callable[[], str], timeout: float = 60) -> tuple[str, int]:
    """The URL and port of ``listening on URL``, the line ``kbctl serve`` prints on stderr once it
    takes connections; a server that exits or says nothing within ``timeout`` seconds is an error
    with its stderr (and is killed)."""
    deadline = time.monotonic() + timeout
    while True:
        found = LISTENING.search(stderr())
        if found:
            return found[1], int(found[2])
        if proc.poll() is not None:
            raise RuntimeError(f"kbctl serve exited {proc.returncode} before it listened: {stderr()[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise RuntimeError(f"kbctl serve did not say it listens within {timeout:g} s: {stderr()[-2000:]}")
        time.sleep(0.05)


def start_server(
    home: Path,
    tenant: str,
    config: Path,
    *args: str,
    options: tuple[str, ...] = (),
    timeout: float = 60,
    port_0: bool = True,
) -> Running:
    """``kbctl OPTIONS serve --port 0 ARGS`` (``OPTIONS``: kbctl's own, ``-q``): the system picks a
    free port as the server binds it (a port picked here and released could be taken by another
    process before the server bound it), read off the line it prints once it listens. Its stderr is
    read all along (a full pipe would stall the server) and kept: ``Running.stderr()``, whole once
    the process has exited. ``port_0=False`` leaves ``--port 0`` out (ARGS or the config say the port)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "kbctl", *options, "serve", *(("--port", "0") if port_0 else ()), *args],
        cwd=ROOT,
        env=env_for(home, tenant, config),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []

    def read() -> None:
        for line in proc.stderr or ():
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def stderr() -> str:
        if proc.poll() is not None:
            reader.join(10)  # the rest of what it wrote before it exited
        return "".join(lines)

    url, port = wait_listening(proc, stderr, timeout)
    return Running(proc, url, port, stderr)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def served(kb_home, tmp_path_factory):
    import kbctl

    tenant = "t_server"
    config = tmp_path_factory.mktemp("server") / "kbctl.toml"
    config.write_text(CONFIG)
    kb = kbctl.open(config=config, home=kb_home, tenant=tenant)
    for ns, folder in (("billing_kb", "support/billing"), ("technical_kb", "support/technical")):
        report = kb.ingest([str(SAMPLE / folder)], ns, verify=False)
        assert report.documents["new"] + report.documents["unchanged"] > 0
    tokens = {a: kb.create_agent_token(a) for a in ("billing", "reader", "ops")}
    kb.close()
    run = start_server(kb_home, tenant, config)
    yield Server(run.url, config, kb_home, tenant, run.proc, tokens)
    stop(run.proc)
