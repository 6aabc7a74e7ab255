"""Memory and time of one large item through the real ``kbctl ingest``.

    python bench/memory.py [--home H] [--no-write]

Each row is one ``kbctl ingest FILE -n NS --profile hash-384`` process (verify included) into a
fresh namespace of a dedicated home (the embedded server already running), so the model does not
dominate the figures. Peak memory is the process's maximum resident set (``ru_maxrss`` from
``wait4``); its growth is that minus the peak of the same command on a one-line file (interpreter,
kbctl, the store's connection pool, the model: the line is new to the store, so it is embedded),
divided by the file's size. The target is a growth of at most 3 times the file's size. Inputs are made at run time in a temporary folder:
text files of 1, 5, 15 and 45 MB repeating the sample corpus (Markdown and text, joined by blank
lines; it has characters outside latin-1, so Python holds the text at 2 bytes a character), and an
RSS 2.0 feed of 100,000 entries.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import KBCTL, REPO, machine, md_table, write_section

MB = 2**20
SIZES = (1, 5, 15, 45)
FEED_ENTRIES = 100_000
SMOKE_SIZES, SMOKE_FEED_ENTRIES = (0.05,), 200  # a smoke pass (bench/run.py --smoke): shows the part runs
PROFILE = "hash-384"


def _ingest(home: Path, path: Path, namespace: str) -> dict:
    """One ``kbctl ingest`` process: wall seconds, peak RSS (bytes) and its exit code."""
    cmd = [KBCTL, "--home", str(home), "ingest", str(path), "-n", namespace, "--profile", PROFILE]
    print("$ kbctl " + " ".join(cmd[1:]), file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"seconds": time.perf_counter() - t0, "peak": usage.ru_maxrss * 1024, "rc": proc.returncode}


def _sample_text() -> str:
    files = sorted((REPO / "sample_corpus").rglob("*.md")) + sorted((REPO / "sample_corpus").rglob("*.txt"))
    return "\n\n".join(p.read_text(encoding="utf-8") for p in files)


def _text_file(folder: Path, mb: float, sample: str) -> Path:
    """``mb`` MiB characters of the sample repeated (joined by blank lines), written a copy at a time:
    the benchmark's own memory must stay below the baseline's (see ``run``)."""
    path = folder / f"text-{mb}mb.txt"
    left = int(mb * MB)
    with path.open("w", encoding="utf-8") as f:
        piece = sample
        while left > 0:
            f.write(piece[:left])
            left -= min(len(piece), left)
            piece = "\n\n" + sample
    return path


def _feed_file(folder: Path, n: int) -> Path:
    path = folder / f"feed-{n}.rss"
    with path.open("w", encoding="utf-8") as f:
        f.write(
            '<?xml version="1.0"?><rss version="2.0"><channel><title>Bench feed</title>'
            "<link>https://example.com/</link>"
        )
        for i in range(n):
            f.write(
                f"<item><title>Entry {i}</title><link>https://example.com/e/{i}</link>"
                f'<guid isPermaLink="false">e-{i}</guid><pubDate>Mon, 06 May 2024 12:00:00 GMT</pubDate>'
                f"<description>&lt;p&gt;Release note {i}: retries, rate limits and timeouts.&lt;/p&gt;</description></item>"
            )
        f.write("</channel></rss>")
    return path


def run(env) -> str:
    """The memory table for docs/benchmarks.md (``env.home`` names the benchmark home)."""
    home = env.home.parent / (env.home.name + "-memory")
    with tempfile.TemporaryDirectory(prefix="kbctl-mem-") as tmp:
        folder = Path(tmp)
        tiny = folder / "tiny.txt"
        tiny.write_text("One line.\n")
        _ingest(home, tiny, "mem_warm")  # starts the server, migrates
        tiny.write_text(f"One line of its own, {time.time_ns()}.\n")  # not in the store: the model loads
        base = _ingest(home, tiny, "mem_base")["peak"]
        # Inputs are made one at a time, right before their row, and written piecewise: a child
        # inherits its parent's peak resident set at fork (Linux keeps the larger of it and the
        # exec'd program's in ``ru_maxrss``), so a benchmark holding a 45 MB string would report
        # its own size for every row (the 130 MB "floor" of the first measurements).
        sample = _sample_text()
        smoke = getattr(env, "smoke", False)
        entries = SMOKE_FEED_ENTRIES if smoke else FEED_ENTRIES
        inputs = [
            (f"text, {mb} MB", lambda mb=mb: _text_file(folder, mb, sample)) for mb in (SMOKE_SIZES if smoke else SIZES)
        ]
        inputs.append((f"RSS feed, {entries:,} entries", lambda: _feed_file(folder, entries)))
        rows = []
        for n, (label, make) in enumerate(inputs):
            path = make()
            size = path.stat().st_size
            load = os.getloadavg()[0]
            r = _ingest(home, path, f"mem_{n}")
            path.unlink()
            growth = r["peak"] - base
            rows.append(
                {
                    "input": label,
                    "file MB": size / MB,
                    "seconds": r["seconds"],
                    "peak RSS MB": r["peak"] / MB,
                    "growth MB": growth / MB,
                    "growth / file size": growth / size,
                    "exit": r["rc"],
                    "load (1 min) before": load,
                }
            )
    subprocess.run([KBCTL, "--home", str(home), "db", "stop"], check=False, stdout=subprocess.DEVNULL)
    if smoke and any(r["exit"] for r in rows):
        raise RuntimeError(f"kbctl ingest failed: {[(r['input'], r['exit']) for r in rows if r['exit']]}")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    head = (
        f"Profile `{PROFILE}`; baseline (the same command on a one-line file): {base / MB:.0f} MB peak RSS;"
        f" load average after the run {load}.\n\n"
    )
    return head + md_table(rows, digits=1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--home", type=Path, default=Path("/tmp/kbctl-bench"), help="benchmark home (a -memory sibling is used)"
    )
    ap.add_argument("--no-write", action="store_true", help="print the table, leave docs/ alone")
    args = ap.parse_args(argv)

    class _Env:
        home = args.home.resolve()

    t0 = time.perf_counter()
    body = run(_Env)
    stamp = f"_Measured {machine()}; took {time.perf_counter() - t0:.0f} s (`python bench/memory.py`)._\n\n"
    print(stamp + body)
    if not args.no_write:
        write_section(REPO / "docs" / "benchmarks.md", "memory", stamp + body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
