"""A running ``kbctl serve`` (a real process on 127.0.0.1) over two namespaces, with agents.

``billing`` may reach only ``billing_kb``; ``reader`` only search_knowledge and list_namespaces;
``ops`` everything. The namespaces use the hash-384 profile (no model is loaded).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
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
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_for(home: Path, tenant: str, config: Path) -> dict[str, str]:
    return dict(
        os.environ, KBCTL_HOME=str(home), KBCTL_TENANT=tenant, KBCTL_CONFIG=str(config), PYTHONWARNINGS="ignore"
    )


def start_server(home: Path, tenant: str, config: Path, port: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kbctl", "serve", "--port", str(port)],
        cwd=ROOT,
        env=env_for(home, tenant, config),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"kbctl serve exited {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("kbctl serve did not start")


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
    port = free_port()
    proc = start_server(kb_home, tenant, config, port)
    yield Server(f"http://127.0.0.1:{port}", config, kb_home, tenant, proc, tokens)
    stop(proc)
