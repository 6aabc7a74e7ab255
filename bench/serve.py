"""The agent surface under load: ``kbctl search`` through a running ``kbctl serve``, and 16 clients.

    python bench/serve.py [--home H] [--seconds 60] [--clients 16] [--no-write]

The store is the sample corpus (support/technical and support/billing, profile minilm) in its own
tenant. Rows:

- ``kbctl search`` wall time (one CLI process each, median of 7 after a warm-up) through the server
  (``KBCTL_SERVER``: the console script's fast path) and in-process, for comparison;
- one search at a time, served (``POST /v1/search``) against in-process (``KnowledgeBase.search``):
  p50 and p95 of 200 each;
- a load test on loopback: ``--clients`` clients for ``--seconds`` (it stops by itself), half on the
  JSON API (``POST /v1/search``), half on MCP (``search_knowledge`` over streamable HTTP, one session
  each): requests, errors, throughput, p50 and p95 latency.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import KBCTL, REPO, Env, machine, write_section

PY = sys.executable
TENANT = "bench_serve"
CONFIG = '[agents.bench]\nnamespaces = ["technical_kb", "billing_kb"]\nk = 5\n'


def _queries() -> list[str]:
    rows = [
        json.loads(line)
        for line in (REPO / "sample_corpus" / "eval" / "queries.jsonl").read_text().splitlines()
        if line.strip()
    ]
    return [r["query"] for r in rows if r.get("namespace") in ("technical_kb", "billing_kb")] or [
        r["query"] for r in rows
    ]


def _env(home: Path, config: Path, **more: str) -> dict[str, str]:
    return dict(
        os.environ, KBCTL_HOME=str(home), KBCTL_TENANT=TENANT, KBCTL_CONFIG=str(config), PYTHONWARNINGS="ignore", **more
    )


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _prepare(home: Path, config: Path) -> str:
    import kbctl

    kb = kbctl.open(config=config, home=home, tenant=TENANT, profile="minilm")
    for ns, folder in (("technical_kb", "support/technical"), ("billing_kb", "support/billing")):
        kb.ingest([str(REPO / "sample_corpus" / folder)], ns, verify=False)
    token = kb.create_agent_token("bench")
    kb.close()
    return token


def _cli_search(home: Path, config: Path, query: str, namespace: str, **env: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        [KBCTL, "search", query, "-n", namespace, "--json"],
        env=_env(home, config, **env),
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
    )
    return time.perf_counter() - t0


def _p(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] * 1000 if len(values) > 1 else float("nan")


def _served_vs_local(home: Path, config: Path, url: str, token: str, queries: list[str], n: int) -> dict:
    """One search at a time, ``n`` each: ``POST /v1/search`` (raw: the same SearchResult) on loopback,
    and ``KnowledgeBase.search`` in this process (warm), over the agent's two namespaces, k = 5."""
    import httpx

    import kbctl

    served, local = [], []
    with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=30) as c:
        for i in range(n + 10):
            t0 = time.perf_counter()
            r = c.post(url + "/v1/search", json={"raw": True, "query": queries[i % len(queries)], "k": 5})
            r.raise_for_status()
            if i >= 10:  # the first ten warm the connection and the server's pool
                served.append(time.perf_counter() - t0)
    kb = kbctl.open(config=config, home=home, tenant=TENANT, profile="minilm")
    try:
        for i in range(n + 10):
            t0 = time.perf_counter()
            kb.search(queries[i % len(queries)], ["technical_kb", "billing_kb"], k=5)
            if i >= 10:
                local.append(time.perf_counter() - t0)
    finally:
        kb.close()
    return {"served": (_p(served, 50), _p(served, 95)), "local": (_p(local, 50), _p(local, 95)), "n": n}


def _json_client(url: str, token: str, queries: list[str], deadline: float, out: list, errors: list) -> None:
    import httpx

    with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=30) as c:
        i = 0
        while i == 0 or time.monotonic() < deadline:  # one request at least, however slow the start
            t0 = time.perf_counter()
            try:
                r = c.post(url + "/v1/search", json={"query": queries[i % len(queries)], "k": 5})
                (out if r.status_code == 200 else errors).append(time.perf_counter() - t0)
            except Exception:
                errors.append(time.perf_counter() - t0)
            i += 1


def _mcp_client(url: str, token: str, queries: list[str], deadline: float, out: list, errors: list) -> None:
    import anyio
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main():
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
            streamable_http_client(url + "/mcp", http_client=http) as s,
            ClientSession(s[0], s[1]) as session,
        ):
            await session.initialize()
            i = 0
            while i == 0 or time.monotonic() < deadline:  # one call at least, however slow the session's start
                t0 = time.perf_counter()
                try:
                    r = await session.call_tool("search_knowledge", {"query": queries[i % len(queries)], "k": 5})
                    (errors if r.is_error else out).append(time.perf_counter() - t0)
                except Exception:
                    errors.append(time.perf_counter() - t0)
                i += 1

    try:
        anyio.run(main)
    except Exception:
        errors.append(0.0)


def _load(url: str, token: str, queries: list[str], clients: int, seconds: float) -> list[dict]:
    deadline = time.monotonic() + seconds
    res = {"JSON API": ([], []), "MCP": ([], [])}
    threads = []
    for i in range(clients):
        kind = "JSON API" if i % 2 == 0 else "MCP"
        fn = _json_client if kind == "JSON API" else _mcp_client
        threads.append(threading.Thread(target=fn, args=(url, token, queries, deadline, *res[kind]), daemon=True))
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 60)
    took = time.perf_counter() - t0
    rows = []
    for kind, (ok, errors) in res.items():
        q = statistics.quantiles(ok, n=100) if len(ok) > 1 else [float("nan")] * 99
        rows.append(
            {
                "surface": kind,
                "clients": clients // 2,
                "requests": len(ok) + len(errors),
                "errors": len(errors),
                "req/s": len(ok) / took,
                "p50 ms": q[49] * 1000,
                "p95 ms": q[94] * 1000,
            }
        )
    return rows


def measure(home: Path, seconds: float, clients: int, repeats: int = 7, single: int = 200, strict: bool = False) -> str:
    """The ``serve`` section; ``strict`` (a smoke pass): a load test with errors or no request raises."""
    load_before = os.getloadavg()[0]
    home.mkdir(parents=True, exist_ok=True)  # a fresh home: the config file is written before kbctl makes it
    config = home / "bench-serve.toml"
    config.write_text(CONFIG)
    token = _prepare(home, config)
    port = _port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [PY, "-m", "kbctl", "serve", "--port", str(port)],
        env=_env(home, config),
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        import httpx

        for _ in range(600):
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        q = _queries()
        via = dict(KBCTL_SERVER=url, KBCTL_TOKEN=token)
        _cli_search(home, config, q[0], "technical_kb", **via)
        served = statistics.median(
            _cli_search(home, config, q[i % len(q)], "technical_kb", **via) for i in range(repeats)
        )
        _cli_search(home, config, q[0], "technical_kb")
        local = statistics.median(_cli_search(home, config, q[i % len(q)], "technical_kb") for i in range(repeats))
        one = _served_vs_local(home, config, url, token, q, single)
        rows = _load(url, token, q, clients, seconds)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    load_after = os.getloadavg()[0]
    if strict and any(r["errors"] or not r["requests"] for r in rows):
        raise RuntimeError(f"the load test had errors or no requests: {rows}")
    lines = [
        f"Load average (1 min) of the machine: {load_before:.2f} at the start, {load_after:.2f} at the end"
        + (
            " (**under load**: other work was running; the latencies are pessimistic)."
            if load_before > 1.0
            else " (the end figure is the load test's own 16 clients and server; nothing else ran)."
        ),
        "",
        f"| `kbctl search` (one process, median of {repeats}) | wall time |",
        "|---|---:|",
        f"| through a running `kbctl serve` | {served:.3f} s |",
        f"| in-process (cold: embedder loaded per process) | {local:.3f} s |",
        "",
        f"One search at a time ({one['n']} each, k = 5, both namespaces): served is `POST /v1/search` on loopback,"
        " in-process is `KnowledgeBase.search` in a warm process.",
        "",
        "| search | p50 ms | p95 ms |",
        "|---|---:|---:|",
        f"| served (`kbctl serve`, JSON API) | {one['served'][0]:.1f} | {one['served'][1]:.1f} |",
        f"| in-process | {one['local'][0]:.1f} | {one['local'][1]:.1f} |",
        f"| served − in-process | {one['served'][0] - one['local'][0]:+.1f} | {one['served'][1] - one['local'][1]:+.1f} |",
        "",
        f"Load test: {clients} clients for {seconds:.0f} s on loopback, `search_knowledge` (k = 5) over the sample corpus.",
        "",
        "| surface | clients | requests | errors | req/s | p50 ms | p95 ms |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['surface']} | {r['clients']} | {r['requests']} | {r['errors']} | {r['req/s']:.1f} | {r['p50 ms']:.1f} | {r['p95 ms']:.1f} |"
        for r in rows
    ]
    return "\n".join(lines) + "\n"


def run(env: Env) -> str:
    """The ``serve`` part of ``bench/run.py``."""
    if env.smoke:
        return measure(env.home, 2, 2, repeats=1, single=5, strict=True)
    return measure(env.home, 60, 16)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, default=None)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    home = args.home or Path(tempfile.mkdtemp(prefix="kbctl-bench-serve-"))
    body = measure(home.resolve(), args.seconds, args.clients)
    print(body)
    if not args.no_write:
        stamp = f"_Measured {machine()} (`python bench/serve.py`)._\n\n"
        write_section(REPO / "docs" / "benchmarks.md", "serve", stamp + body)
    if args.home is None:
        subprocess.run([PY, "-m", "kbctl", "--home", str(home), "db", "stop"], check=False, capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
