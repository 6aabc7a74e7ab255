"""Cold ``kbctl search``: wall time and peak memory of one CLI process, and where the time goes.

    python bench/cold.py [--home H] [--runs 7] [--no-write]

The store is the sample corpus (``sample_corpus/support/technical`` as ``technical_kb``) in its own
home; the embedded server is running, as it is for any second command of a session. Each row is the
median of ``--runs`` processes (after one warm-up process, so the page cache holds the files).
Peak memory is the process's maximum resident set (``ru_maxrss``, read by the process at exit).

Rows:

- ``auto`` as decided on this CPU (the recorded decision's flags are printed);
- ``auto`` on a CPU without bf16: the same machine with ``avx512_bf16``/``amx_bf16`` hidden from
  ``kbctl.embed.precision.cpu_features`` (a separate model cache, so it is decided again);
- ``bf16`` pinned in the profile: what every cold search paid before queries had their own backend
  (torch and sentence-transformers imported for one query).

The breakdown runs the same steps in one process with a timer around each (interpreter start is a
separate ``python -c pass``), and ``-X importtime`` gives the import share per top-level package.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO, write_section

PY = sys.executable
QUERY = "LMN-4012 scope denied"
NS = "technical_kb"
HEAVY = ("torch", "transformers", "sentence_transformers", "trafilatura", "pdfplumber", "feedparser")

# Runs the CLI in-process, optionally with bf16 hidden from the CPU flags, and reports heavy imports.
_RUNNER = """
import atexit, json, resource, sys
heavy = {heavy!r}
atexit.register(lambda: sys.stderr.write("HEAVY " + json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set(heavy)))
                + " " + str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) + "\\n"))
if {no_bf16!r}:
    import kbctl.embed.precision as p
    _orig = p.cpu_features
    p.cpu_features = lambda *a: _orig(*a) - {{"avx512_bf16", "amx_bf16"}}
from kbctl.cli.main import main
main({argv!r})
"""


def _env(home: Path, cache: Path | None = None, config: Path | None = None) -> dict[str, str]:
    e = dict(os.environ, KBCTL_HOME=str(home), PYTHONWARNINGS="ignore")
    if cache:
        e["KBCTL_MODEL_CACHE"] = str(cache)
    if config:
        e["KBCTL_CONFIG"] = str(config)
    return e


def run_cli(argv: list[str], env: dict[str, str], no_bf16: bool = False) -> tuple[float, int, list[str], str]:
    """(wall seconds, peak RSS in MiB, heavy modules imported, stdout) of one CLI process."""
    code = _RUNNER.format(heavy=HEAVY, no_bf16=no_bf16, argv=argv)
    t0 = time.perf_counter()
    p = subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"kbctl {' '.join(argv)} failed ({p.returncode}):\n{p.stderr}")
    m = re.search(r"^HEAVY (\[.*\]) (\d+)$", p.stderr, re.M)
    return wall, int(m.group(2)) // 1024, json.loads(m.group(1)), p.stdout


def prepare(home: Path) -> None:
    if subprocess.run(
        [PY, "-m", "kbctl", "namespaces", "--json"], env=_env(home), capture_output=True, text=True
    ).stdout.count(NS):
        return
    subprocess.run(
        [PY, "-m", "kbctl", "ingest", str(REPO / "sample_corpus/support/technical"), "-n", NS],
        env=_env(home),
        check=True,
        capture_output=True,
    )


def decision(env: dict[str, str], no_bf16: bool) -> dict:
    code = (
        "import json, sys\n"
        "import kbctl.embed.precision as p\n"
        f"if {no_bf16!r}:\n"
        "    _o = p.cpu_features; p.cpu_features = lambda *a: _o(*a) - {'avx512_bf16', 'amx_bf16'}\n"
        "from kbctl.config import load_settings\n"
        "from kbctl.embed import prepare\n"
        "c = prepare(load_settings().profile())\n"
        "print(json.dumps({'throughput': c.precision, 'query': c.query_precision, 'flags': list(c.cpu_flags),"
        " 'features': sorted(p.cpu_features() & {'avx512_bf16', 'amx_bf16', 'avx2', 'avx512f'})}))\n"
    )
    out = subprocess.run([PY, "-c", code], env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def measure(argv: list[str], env: dict[str, str], runs: int, no_bf16: bool = False, warm: bool = True) -> dict:
    if warm:
        run_cli(argv, env, no_bf16)  # warm-up: page cache
    walls, rss = [], []
    heavy: set[str] = set()
    for _ in range(runs):
        w, r, h, _ = run_cli(argv, env, no_bf16)
        walls.append(w)
        rss.append(r)
        heavy.update(h)
    return {
        "median_s": statistics.median(walls),
        "runs_s": walls,
        "peak_mib": statistics.median(rss),
        "heavy": sorted(heavy),
    }


_PHASES = """
import time, sys
t = [("start", time.perf_counter())]
def mark(name): t.append((name, time.perf_counter()))
import kbctl.cli.main, kbctl.api, kbctl.search, kbctl.store; mark("imports (cli, api, search, store)")
import kbctl
kb = kbctl.open(); s = kb.settings; mark("settings")
conn = kb.connection(); mark("connect (+ migration check)")
ns = kb.namespace({ns!r}); prof = kb.profile_for({ns!r}); mark("namespace and profile")
from kbctl.embed import get_embedder
import onnxruntime, tokenizers; mark("import onnxruntime, tokenizers")
e = get_embedder(prof, purpose="query"); mark("model load (ONNX session, tokenizer)")
e.embed_query("warm up the session"); mark("first inference")
e.embed_query({q!r}); mark("query embedding")
kb.search({q!r}, {ns!r}); mark("search (lanes, fusion, shaping), first")
kb.search({q!r}, {ns!r}); mark("search, second")
kb.close(); mark("close")
for (a, ta), (b, tb) in zip(t, t[1:]):
    print(f"{{b}}\\t{{(tb - ta) * 1000:.1f}}")
"""


def breakdown(env: dict[str, str], repeats: int = 5) -> list[tuple[str, float]]:
    ms = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([PY, "-c", "pass"], env=env, check=True)
        ms.append((time.perf_counter() - t0) * 1000)
    rows = [("interpreter start (python -c pass)", statistics.median(ms))]
    runs = []
    for _ in range(repeats):
        out = subprocess.run(
            [PY, "-c", _PHASES.format(ns=NS, q=QUERY)], env=env, check=True, capture_output=True, text=True
        ).stdout
        runs.append([(line.split("\t")[0], float(line.split("\t")[1])) for line in out.strip().splitlines()])
    for i, (name, _) in enumerate(runs[0]):
        rows.append((name, statistics.median(r[i][1] for r in runs)))
    return rows


def import_shares(env: dict[str, str]) -> list[tuple[str, float]]:
    code = _RUNNER.format(heavy=HEAVY, no_bf16=False, argv=["search", QUERY, "-n", NS, "-k", "5"])
    p = subprocess.run([PY, "-X", "importtime", "-c", code], env=env, capture_output=True, text=True, check=True)
    total: dict[str, float] = defaultdict(float)
    for line in p.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if m and len(m.group(3)) == 1:  # top-level imports only: their cumulative time includes children
            total[m.group(4).split(".")[0]] += int(m.group(2)) / 1000
    return sorted(total.items(), key=lambda kv: -kv[1])[:12]


def run(env=None, runs: int | None = None, home: Path | None = None) -> str:
    """Measure and return the markdown for docs/benchmarks.md (the ``cold`` section)."""
    smoke = env is not None and env.smoke
    runs = runs or (1 if smoke else 7)
    home = home or (
        Path(str(env.home) + "-cold") if env is not None else Path(tempfile.gettempdir()) / "kbctl-bench-cold"
    )
    prepare(home)
    argv = ["search", QUERY, "-n", NS, "-k", "5"]
    rows = []
    env_auto = _env(home)
    d = decision(env_auto, False)
    rows.append(("auto, this CPU", d, measure(argv, env_auto, runs, warm=not smoke)))
    env_nb = _env(home, cache=home / "models-no-bf16")
    d_nb = decision(env_nb, True)
    rows.append(
        (
            "auto, bf16 hidden (a CPU without avx512_bf16)",
            d_nb,
            measure(argv, env_nb, runs, no_bf16=True, warm=not smoke),
        )
    )
    cfg = home / "bf16.toml"
    cfg.write_text('[profiles.minilm]\nprecision = "bf16"\n')
    rows.append(
        (
            "bf16 pinned (torch for the query: the old default here)",
            {**d, "query": "bf16"},
            measure(argv, _env(home, config=cfg), runs, warm=not smoke),
        )
    )
    phases = breakdown(env_auto, 1 if smoke else 5)
    imports = import_shares(env_auto)
    subprocess.run([PY, "-m", "kbctl", "db", "stop"], env=env_auto, capture_output=True)

    lines = [
        f"Median of {runs} processes each (after one warm-up), sample corpus `technical_kb`, query `{QUERY}`, server running.",
        "",
        "| setting | CPU flags seen | throughput backend | query backend | cold `kbctl search` median (s) | runs (s) | peak RSS (MiB) | heavy modules imported |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, dec, m in rows:
        flags = ", ".join(f for f in dec["features"] if "bf16" in f or f in ("avx2", "avx512f")) or "none"
        lines.append(
            f"| {name} | {flags} | {dec['throughput']} | {dec['query']} | {m['median_s']:.2f} | "
            f"{', '.join(f'{x:.2f}' for x in m['runs_s'])} | {m['peak_mib']:.0f} | {', '.join(m['heavy']) or 'none'} |"
        )
    lines += [
        "",
        f"Where the time goes (`auto` on this CPU; median of {1 if smoke else 5} processes, steps timed in order):",
        "",
        "| step | ms |",
        "|---|---|",
    ]
    lines += [f"| {n} | {v:.1f} |" for n, v in phases]
    lines += [
        "",
        "Import time by top-level package (`-X importtime`, cumulative, one `kbctl search` process):",
        "",
        "| package | ms |",
        "|---|---|",
    ]
    lines += [f"| {n} | {v:.1f} |" for n, v in imports]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", type=Path, default=Path(tempfile.gettempdir()) / "kbctl-bench-cold")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    from common import machine

    t0 = time.perf_counter()
    text = run(runs=a.runs, home=a.home)
    print(text)
    if not a.no_write:
        stamp = f"_Measured {machine()}; part took {time.perf_counter() - t0:.0f} s (`python bench/run.py --only cold`)._\n\n"
        write_section(REPO / "docs/benchmarks.md", "cold", stamp + text)


if __name__ == "__main__":
    main()
