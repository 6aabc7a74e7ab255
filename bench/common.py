"""Shared helpers of the benchmarks: paths, the kbctl CLI, timing, markdown tables, doc sections."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
KBCTL = str(BIN / "kbctl")


@dataclass(frozen=True)
class Env:
    """Where a benchmark run reads collections from and keeps its store."""

    evaldata: Path
    home: Path

    def collection(self, name: str) -> Path:
        return self.evaldata / name


def kbctl(env: Env, *args: str, home: Path | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Run the kbctl CLI against the benchmark home; stderr is passed through."""
    cmd = [KBCTL, "--home", str(home or env.home), *args]
    print("$ " + " ".join(_short(a) for a in cmd[1:]), file=sys.stderr, flush=True)
    return subprocess.run(cmd, check=check, stdout=subprocess.PIPE, text=True)


def _short(a: str) -> str:
    return a.replace(str(REPO) + "/", "")


def timed(fn, *args, **kwargs) -> tuple[Any, float]:
    """``(result, seconds)`` of one call."""
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def md_table(rows: Sequence[dict], columns: Sequence[str] | None = None, digits: int = 3) -> str:
    """A GitHub markdown table of ``rows`` (dicts), columns in the given order."""
    if not rows:
        return "_(no rows)_\n"
    cols = list(columns or rows[0].keys())
    out = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for r in rows:
        out.append("| " + " | ".join(fmt(r.get(c), digits) for c in cols) + " |")
    return "\n".join(out) + "\n"


def machine() -> str:
    """One line describing where the figures were measured."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{os.cpu_count()} cores ({cpu or 'unknown CPU'}), Python {sys.version.split()[0]}, {time.strftime('%Y-%m-%d')}"
    )


def write_section(doc: Path, name: str, body: str) -> None:
    """Replace the text between ``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->`` in ``doc``.

    The prose around the markers is hand-written and kept; a missing section is appended.
    """
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    text = doc.read_text() if doc.exists() else ""
    block = f"{start}\n{body.rstrip()}\n{end}"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _m: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    doc.write_text(text)


def results_dir(env: Env) -> Path:
    """``<home>-results/``: raw results next to the store, for inspection (never in the repository)."""
    out = env.home.parent / (env.home.name + "-results")
    out.mkdir(parents=True, exist_ok=True)
    return out


def save_json(env: Env, name: str, data: Any) -> Path:
    """Keep raw results next to the store, for inspection (never in the repository)."""
    path = results_dir(env) / f"{name}.json"
    path.write_text(json.dumps(data, indent=1, default=str))
    return path
