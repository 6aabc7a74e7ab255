"""The CLI side of the agent surface: search forwarded to a running server (and the fallback),
tokens, stats and the feedback dataset."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import httpx
import pytest

from tests.conftest import ROOT
from tests.server.conftest import env_for, free_port, start_server, stop, wait_listening


def env(served, **more):
    return {"KBCTL_CONFIG": str(served.config), **more}


def test_search_forwards_to_the_server_and_falls_back(served, cli):
    p = cli(
        "search",
        "refund",
        "-n",
        "billing_kb",
        "--json",
        tenant_override=served.tenant,
        env=env(served, KBCTL_SERVER=served.url, KBCTL_TOKEN=served.tokens["ops"]),
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["hits"]
    down = cli(
        "search",
        "refund",
        "-n",
        "billing_kb",
        "--json",
        tenant_override=served.tenant,
        env=env(served, KBCTL_SERVER="http://127.0.0.1:9", KBCTL_TOKEN="x"),
    )
    assert down.returncode == 0
    local = json.loads(down.stdout)["hits"]
    for hit in local:  # an answer of the server holds no server paths (issue 26): the rest is the same
        hit["metadata"] = {k: v for k, v in hit["metadata"].items() if k not in ("uri", "abs_path")}
    served_hits = json.loads(p.stdout)["hits"]
    for hit in served_hits:  # but its ids are the opaque ones agents see: the operator opens them
        for key, kind in (("doc_id", "document"), ("chunk_id", "chunk")):
            assert isinstance(hit[key], str)
            opened = cli("tenants", "id-of", hit[key], "--json", tenant_override=served.tenant, env=env(served))
            assert opened.returncode == 0, opened.stderr
            found = json.loads(opened.stdout)
            assert found["kind"] == kind and found["tenant"] == served.tenant
            hit[key] = found["id"]
    assert local == served_hits
    refused = cli(
        "search",
        "refund",
        "-n",
        "technical_kb",
        tenant_override=served.tenant,
        env=env(served, KBCTL_SERVER=served.url, KBCTL_TOKEN=served.tokens["billing"]),
    )
    assert refused.returncode == 2 and b"not available" in refused.stderr


def test_a_search_past_the_servers_limits_runs_in_process(served, cli):
    """The server's [server] max_k and max_query_chars are limits for agents; a search from the
    shell past them is answered in-process, as the CLI answers without a server (it was refused)."""
    forwarded = env(served, KBCTL_SERVER=served.url, KBCTL_TOKEN=served.tokens["ops"])
    wide = cli(
        "search", "refund", "-n", "billing_kb", "-k", "60", "--json", tenant_override=served.tenant, env=forwarded
    )
    assert wide.returncode == 0, wide.stderr
    assert json.loads(wide.stdout)["hits"]
    long_query = "refund " * 90  # 630 characters, past max_query_chars = 500
    long = cli("search", long_query, "-n", "billing_kb", "--json", tenant_override=served.tenant, env=forwarded)
    assert long.returncode == 0, long.stderr
    assert json.loads(long.stdout)["hits"]


def test_token_create_stats_and_feedback_dataset(served, cli, tmp_path):
    t = cli("agents", "token", "create", "reader", tenant_override=served.tenant, env=env(served))
    token = t.stdout.decode().strip()
    assert t.returncode == 0 and token.startswith("kb_")
    assert httpx.get(served.url + "/v1/namespaces", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    assert cli("agents", "token", "create", "nobody", tenant_override=served.tenant, env=env(served)).returncode == 2
    s = json.loads(cli("stats", "--json", tenant_override=served.tenant, env=env(served)).stdout)
    assert {n["name"] for n in s["namespaces"]} == {"billing_kb", "technical_kb"} and s["totals"]["documents"] > 0
    h = {"Authorization": f"Bearer {served.tokens['billing']}"}
    found = httpx.post(served.url + "/v1/search", json={"query": "wire transfer invoice", "k": 3}, headers=h).json()
    for i, p in enumerate(found["passages"][:2]):
        httpx.post(
            served.url + "/v1/feedback",
            json={"query_id": found["query_id"], "doc_id": p["doc_id"], "useful": i == 0},
            headers=h,
        )
    out = tmp_path / "feedback.jsonl"
    p = cli(
        "eval", "import-feedback", "-n", "billing_kb", "-o", str(out), tenant_override=served.tenant, env=env(served)
    )
    assert p.returncode == 0, p.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    mine = [r for r in rows if r["query"] == "wire transfer invoice"]
    assert mine and 1 in mine[0]["relevant"].values()
    run = cli("eval", "run", str(out), "--modes", "hybrid", tenant_override=served.tenant, env=env(served))
    assert run.returncode == 0, run.stderr


def test_a_port_out_of_range_is_a_usage_error(cli_process):
    """``--port`` is held to 0..65535 as ``[server] port`` is: uvicorn's bind raised an
    OverflowError, logged twice with its traceback."""
    for port in ("80000", "-1"):
        p = cli_process("serve", "--port", port)
        err = p.stderr.decode()
        assert p.returncode == 2, err
        assert "Traceback" not in err and "ERROR:" not in err, err
        assert err.startswith("error: invalid value for '--port'") and "\nhint: " in err, err


def test_every_bind_the_machine_refuses_is_a_runtime_failure_with_a_hint_by_cause():
    """The causes a test cannot make here (a port below 1024 binds for root): each is exit 1, one
    line naming the address, a hint that says what to change."""
    import errno

    from kbctl.server import _bind_refused

    for code, why, hinted in [
        (errno.EADDRINUSE, "the port is in use", "another kbctl serve?"),
        (errno.EADDRNOTAVAIL, "not an address of this machine", "--host"),
        (errno.EACCES, "permission denied", "below 1024"),
        (errno.EPERM, "Operation not permitted", "--port"),
    ]:
        e = _bind_refused("0.0.0.0:80", 80, code, "Operation not permitted")
        assert e.exit_code == 1 and e.message == f"cannot listen on 0.0.0.0:80: {why}", e.message
        assert hinted in e.hint and ("--port" in e.hint or "--host" in e.hint), e.hint


def test_a_port_in_use_or_an_address_not_of_this_machine_is_one_line(cli_process):
    """uvicorn logged its bind error ("ERROR: [Errno 98] …") and exited 3, which for kbctl means
    a check did not hold; a cron job or a supervisor read it as a failed verify. The address is
    now tried before the server starts: one line with a hint. A bind this machine refuses (the port
    in use, an address not of this machine) is a runtime failure, exit 1, as README's table has
    it (the address not ours was exit 2, a usage error, while the port in use was 1); a host name
    that does not resolve is a name that does not exist, exit 2."""

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = str(held.getsockname()[1])
        p = cli_process("serve", "--port", port)
    err = p.stderr.decode()
    assert p.returncode == 1, err
    assert "ERROR:" not in err and "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 2 and lines[0].startswith("error:") and lines[1].startswith("hint:"), err
    assert f"127.0.0.1:{port}" in lines[0] and "in use" in lines[0] and "--port" in lines[1], err

    for host, code in (("192.0.2.1", 1), ("no-such-host.invalid", 2)):  # TEST-NET-1: never this machine's
        p = cli_process("serve", "--host", host, "--port", "0")
        err = p.stderr.decode()
        assert p.returncode == code, err
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 2 and lines[0].startswith("error:") and host in lines[0], err
        assert lines[1].startswith("hint:") and "--host" in lines[1], err


def test_port_0_listens_on_a_port_the_system_picks_and_says_which(cli_process, kb_home, tenant, tmp_path):
    """``--port 0`` (and ``[server] port = 0``) is what it is to every server: the system picks a
    free port. It listened on 8765 (``port or srv.port`` read 0 as "not given"), and nothing said
    where it listened; the line kbctl prints once it listens names the real port, so a supervisor
    or a test can read it. ``--port 0`` wins over a ``[server] port`` as any ``--port`` does."""
    with socket.socket() as held:  # a [server] port in use: --port 0 must not go there
        held.bind(("127.0.0.1", 0))
        held.listen()
        configured = held.getsockname()[1]
        for args, port_key in ((("--port", "0"), configured), ((), 0)):
            config = tmp_path / f"serve-{port_key}.toml"
            config.write_text(f'[defaults]\nprofile = "hash-384"\n\n[server]\nport = {port_key}\n')
            run = start_server(kb_home, tenant, config, *args, port_0=False)
            try:
                assert run.port not in (0, 8765, configured), (args, run.port)
                assert run.url == f"http://127.0.0.1:{run.port}", run.url
                assert httpx.get(run.url + "/healthz", timeout=10).status_code == 200
            finally:
                stop(run.proc)
            assert run.proc.returncode == 0, (args, run.proc.returncode)


def test_port_0_says_where_it_listens_under_quiet_too(cli_process, kb_home, tenant, tmp_path):
    """``kbctl -q serve --port 0`` printed nothing, and the line is the only way a script learns the
    port the system picked: it is printed under ``-q`` too, on stderr as without it, and nothing
    else is. With a port given (the caller knows it) ``-q`` keeps the server silent."""
    config = tmp_path / "kbctl.toml"
    config.write_text('[defaults]\nprofile = "hash-384"\n')
    run = start_server(kb_home, tenant, config, options=("-q",), timeout=30)
    try:
        assert run.port != 0 and httpx.get(run.url + "/healthz", timeout=10).status_code == 200
    finally:
        stop(run.proc)
    assert run.proc.returncode == 0 and run.stderr() == f"listening on {run.url}\n", run.stderr()
    zero = tmp_path / "port-0.toml"  # [server] port = 0: the same
    zero.write_text('[defaults]\nprofile = "hash-384"\n\n[server]\nport = 0\n')
    log = tmp_path / "port-0.stderr"
    with log.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kbctl", "-q", "serve"], cwd=ROOT, env=env_for(kb_home, tenant, zero), stderr=stderr
        )
    try:
        url, port = wait_listening(proc, log.read_text, timeout=30)
    finally:
        stop(proc)
    assert port != 0 and log.read_text() == f"listening on {url}\n", log.read_text()

    for _ in range(3):  # a port picked and released: another process may take it first, then pick again
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "kbctl", "-q", "serve", "--port", str(port)],
            cwd=ROOT,
            env=env_for(kb_home, tenant, config),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 60
            while proc.poll() is None and time.monotonic() < deadline:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.2)
            else:
                if proc.poll() is not None and "in use" in (proc.stderr.read() if proc.stderr else ""):
                    continue
                raise AssertionError(f"kbctl -q serve --port {port} did not answer (exit {proc.returncode})")
        finally:
            stop(proc)
        out, err = proc.communicate()
        assert proc.returncode == 0 and (out, err) == ("", ""), (proc.returncode, out, err)
        break
    else:
        raise AssertionError("three ports picked were taken before the server bound them")


def test_port_0_on_a_name_of_two_addresses_is_one_port_for_both(monkeypatch):
    """A name of an IPv4 and an IPv6 address (``localhost`` on many machines) is bound on both, as
    asyncio's server binds it; with port 0 on one port, the one the line says, not one port each."""
    import socket as socket_mod

    import kbctl.server as server

    if not socket_mod.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    both = [
        (socket_mod.AF_INET6, socket_mod.SOCK_STREAM, 6, "", ("::1", 0, 0, 0)),
        (socket_mod.AF_INET, socket_mod.SOCK_STREAM, 6, "", ("127.0.0.1", 0)),
    ]
    monkeypatch.setattr(server.socket, "getaddrinfo", lambda *a, **k: both)
    try:
        bound = server._bind("localhost", 0)
    except server.KbctlError as e:  # a machine whose loopback has no ::1
        pytest.skip(e.message)
    try:
        names = [s.getsockname() for s in bound]
        assert [n[0] for n in names] == ["::1", "127.0.0.1"], names
        assert names[0][1] == names[1][1] != 0, names
    finally:
        for s in bound:
            s.close()
