"""Shared helpers of the benchmarks: paths, the kbctl CLI, timing, markdown tables, doc sections."""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence, TypeVar

REPO = Path(__file__).resolve().parent.parent
#: Where the research collections are (beside the repository, never in it); parts and scripts take
#: ``--evaldata`` to read them elsewhere.
EVALDATA = REPO.parent / "shared" / "evaldata"
BIN = Path(sys.executable).parent
KBCTL = str(BIN / "kbctl")
T = TypeVar("T")


@dataclass(frozen=True)
class Env:
    """Where a benchmark run reads collections from and keeps its store, and how large it runs.

    ``smoke``: every part at tiny sizes (``python bench/run.py --smoke``), to show it runs, not to
    measure; ``scale``: the chunk counts of the two scaled namespaces (bench/scale.py); ``queries``:
    at most this many queries (claims, topics) per collection, None for all of them; ``ingest_docs``:
    the ingest part imports the first this many documents of SciFact, None for all of them.
    """

    evaldata: Path
    home: Path
    smoke: bool = False
    scale: tuple[int, int] = (10_000, 100_000)
    queries: int | None = None
    ingest_docs: int | None = None

    def collection(self, name: str) -> Path:
        return self.evaldata / name

    def few(self, items: Sequence[T]) -> list[T]:
        """``items``, cut to ``queries`` when it is set."""
        return list(items if self.queries is None else items[: self.queries])

    def pick(self, full: Any, smoke: Any) -> Any:
        """``full``, or ``smoke`` in a smoke pass (repeats, seconds, file sizes of one part)."""
        return smoke if self.smoke else full


def ensure_imported(env: Env, name: str, home: Path | None = None) -> dict:
    """``kbctl eval import`` of collection ``name`` into namespace ``name`` (a no-op once imported),
    so that a part reading that namespace also runs on a fresh home; the run summary."""
    out = kbctl(env, "eval", "import", str(env.collection(name)), "-n", name, "--json", home=home)
    return json.loads(out.stdout)


def kbctl(env: Env, *args: str, home: Path | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Run the kbctl CLI against the benchmark home; stderr is passed through."""
    cmd = [KBCTL, "--home", str(home or env.home), *args]
    print("$ " + " ".join(_short(a) for a in cmd[1:]), file=sys.stderr, flush=True)
    return subprocess.run(cmd, check=check, stdout=subprocess.PIPE, text=True)


def fresh_home(env: Env, suffix: str) -> Path:
    """A part's own home beside the benchmark's (``<home><suffix>``), empty: the server a past run
    left there is stopped and its files removed."""
    home = env.home.parent / (env.home.name + suffix)
    if home.exists():
        kbctl(env, "db", "stop", home=home, check=False)
        shutil.rmtree(home)
    return home


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


def verdict(env: Env, ok: bool, yes: str = "met", no: str = "missed") -> str:
    """``**met**`` / ``**missed**`` against a target; a smoke pass runs at tiny sizes, where no
    target means anything, so it says so instead."""
    if env.smoke:
        return "(smoke pass: no verdict)"
    return f"**{yes if ok else no}**"


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


def judged_queries(env: Env, name: str, split: str = "test") -> list[tuple[str, str, set[str]]]:
    """(query id, text, judged-relevant document ids) of collection ``name``'s queries judged in ``split``."""
    base = env.collection(name)
    text = {}
    for line in (base / "queries.jsonl").read_text().splitlines():
        if line.strip():
            q = json.loads(line)
            text[q["_id"]] = q["text"]
    rel: dict[str, set[str]] = defaultdict(set)
    with open(base / "qrels" / f"{split}.tsv", newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            if int(row["score"]) > 0:
                rel[row["query-id"]].add(row["corpus-id"])
    return [(qid, text[qid], docs) for qid, docs in rel.items() if qid in text]


def script_args(description: str | None, limit_help: str) -> argparse.ArgumentParser:
    """The options of a part run as a script of its own: ``--home``, ``--evaldata``, ``--limit``, ``--no-write``."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, default=Path("/tmp/kbctl-bench"))
    ap.add_argument("--evaldata", type=Path, default=EVALDATA)
    ap.add_argument("--limit", type=int, default=None, help=limit_help)
    ap.add_argument("--no-write", action="store_true")
    return ap


def write_figures(part: str, script: str, docs: Sequence[str], body: str) -> None:
    """Write ``body`` with a "measured on" stamp into the ``part`` section of each of ``docs``."""
    stamp = f"_Measured {machine()} (`python bench/{script}`)._\n\n"
    for doc in docs:
        write_section(REPO / doc, part, stamp + body)
