"""Embedding throughput and agreement with fp32 for each precision, as a markdown table.

    python bench/embed_speed.py [--limit 1000] [--precisions fp32,bf16,onnx-int8,onnx-fp32] [--write docs/embedding-speed.md]

Passages: the first ``--limit`` SciFact documents ("title text") from
../shared/evaldata/scifact/corpus.jsonl when present, else the sample corpus files. Each
precision embeds the same passages once after a warm-up batch; cosine is per passage against fp32.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kbctl.config import load_settings  # noqa: E402
from kbctl.embed import get_embedder  # noqa: E402
from kbctl.embed.precision import cpu_features, decide_precision  # noqa: E402

SCIFACT = ROOT.parent / "shared" / "evaldata" / "scifact" / "corpus.jsonl"  # as bench/common.EVALDATA
MARK = "<!-- bench:table -->"


def passages(limit: int) -> tuple[list[str], str]:
    """The benchmark passages and where they came from."""
    if SCIFACT.exists():
        out = []
        with SCIFACT.open(encoding="utf-8") as f:
            for line in f:
                d = json.loads(line)
                out.append(f"{d.get('title', '')} {d.get('text', '')}".strip())
                if len(out) >= limit:
                    break
        return out, f"first {len(out)} SciFact documents"
    files = sorted(p for p in (ROOT / "sample_corpus").rglob("*") if p.suffix in (".md", ".txt"))
    texts = [p.read_text(encoding="utf-8", errors="replace")[:2000] for p in files][:limit]
    return texts, f"{len(texts)} sample_corpus files"


def measure(profile, precision: str, texts: list[str], home: Path) -> tuple[float, np.ndarray, float]:
    """Passages per second, the vectors, and the load time (export included on first use)."""
    t0 = time.perf_counter()
    emb = get_embedder(dataclasses.replace(profile, precision=precision), home=home)
    load = time.perf_counter() - t0
    emb.embed_documents(texts[:32])  # warm-up
    t0 = time.perf_counter()
    vectors = emb.embed_documents(texts)
    return len(texts) / (time.perf_counter() - t0), vectors, load


def table(rows: list[tuple[str, float, float, float, float]]) -> str:
    lines = [
        "| precision | passages/s | speed-up | min cosine to fp32 | mean cosine to fp32 |",
        "|---|---:|---:|---:|---:|",
    ]
    base = rows[0][1]
    for name, rate, lo, mean, _ in rows:
        lines.append(f"| {name} | {rate:.1f} | {rate / base:.2f}× | {lo:.4f} | {mean:.4f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=1000)
    ap.add_argument("--precisions", default="fp32,bf16,onnx-int8,onnx-fp32")
    ap.add_argument("--write", type=Path, help="replace the table after the marker in this markdown file")
    ap.add_argument("--emulated-limit", type=int, default=200, help="passages for bf16 on a CPU without native bf16")
    ap.add_argument("--home", type=Path, help="kbctl home for the model cache (default: a temp dir)")
    args = ap.parse_args()
    home = args.home or Path(tempfile.mkdtemp(prefix="kbctl-bench-"))
    profile = load_settings(env={}).profile("minilm")
    texts, source = passages(args.limit)
    rows, ref = [], None
    emulated = not cpu_features() & {"avx512_bf16", "amx_bf16"}
    for precision in ["fp32"] + [p for p in args.precisions.split(",") if p != "fp32"]:
        subset = texts[: args.emulated_limit] if precision == "bf16" and emulated else texts
        rate, v, load = measure(profile, precision, subset, home)
        v = v / np.linalg.norm(v, axis=1, keepdims=True)
        ref = v if ref is None else ref
        cos = (v * ref[: len(v)]).sum(axis=1)
        name = f"{precision} (emulated, {len(subset)} passages)" if len(subset) < len(texts) else precision
        rows.append((name, rate, float(cos.min()), float(cos.mean()), load))
        print(f"{precision}: {rate:.1f} passages/s, load {load:.1f}s", file=sys.stderr, flush=True)
    auto = decide_precision(dataclasses.replace(profile, precision="auto"), home, load=get_embedder)
    flags = sorted(cpu_features() & {"avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16"})
    report = "\n".join(
        [
            table(rows),
            "",
            f"{source}, {profile.model}, max_tokens {profile.max_tokens}, batch {profile.batch_size}; "
            f"{os.cpu_count()} cores, {platform.processor() or platform.machine()}, flags: {', '.join(flags) or 'none'}.",
            f"`auto` here: **{auto.precision}** ({auto.reason}).",
        ]
    )
    print(report)
    if args.write:
        text = args.write.read_text(encoding="utf-8") if args.write.exists() else MARK + "\n"
        head = text.split(MARK)[0]
        args.write.write_text(f"{head}{MARK}\n{report}\n", encoding="utf-8")


if __name__ == "__main__":
    main()
