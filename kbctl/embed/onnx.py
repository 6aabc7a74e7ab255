"""sentence-transformers BERT-style models run by onnxruntime, in fp32 or with int8 weights.

The model's transformer (``input_ids``, ``attention_mask``, ``token_type_ids`` → ``last_hidden_state``)
is exported once with the TorchScript-based ``torch.onnx.export`` (``model-fp32.onnx``) and quantized
with onnxruntime's dynamic quantization (``model-int8.onnx``). Both files are cached under
``<cache_dir>/<model>-<hash of its files>/``, so later loads only open an ``InferenceSession``;
torch is imported only for the export.

``onnx-fp32`` computes what sentence-transformers computes (the same weights and pooling; vectors
agree to ~1e-6) without importing torch, transformers, scipy and scikit-learn: a process that embeds
one query (a cold ``kbctl search``) starts in about a second instead of ten.

Quantization recipe, chosen by measured cosine to fp32 on SciFact passages (all-MiniLM-L6-v2, AVX2):
per-channel weights, no reduced range, ``QUInt8`` weights (min cosine 0.996 against 0.992 for
``QInt8``), and the feed-forward down-projections (``layer.N/output/dense``) kept in fp32: their
inputs are post-GELU activations whose outliers per-tensor activation quantization handles worst.
Everything else mirrors the sentence-transformers model: its tokenizer, truncation, pooling (from
``1_Pooling/config.json``) and normalisation.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import warnings
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..config import Profile
from ..errors import EmbeddingError
from .cpu import cpu_features
from .protocol import dimension_mismatch

__all__ = ["OnnxEmbedder", "export_onnx", "export_int8", "onnx_available", "model_cache_dir", "default_cache_root"]

log = logging.getLogger(__name__)

# Bumped whenever the export or quantization recipe changes, so old cached files are not reused.
RECIPE = "int8-v1"
INT8_FILE = "model-int8.onnx"
FP32_FILE = "model-fp32.onnx"
FILES = {"onnx-int8": INT8_FILE, "onnx-fp32": FP32_FILE}
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_HINT = "use precision = 'fp32' in the profile, or install onnx and onnxruntime"


def onnx_available() -> bool:
    """True when both ``onnx`` (for the export) and ``onnxruntime`` (for inference) are installed.

    Looked up, not imported: ``auto`` asks on every start, and importing onnx costs a few hundred ms.
    """
    from importlib.util import find_spec

    return all(find_spec(name) is not None for name in ("onnx", "onnxruntime"))


def default_cache_root() -> Path:
    """Where exported models go when the caller gives no cache dir: the user cache dir of kbctl."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("kbctl")) / "models"


def model_cache_dir(model: str, model_path: Path, cache_root: Path) -> Path:
    """``<cache_root>/<model>-<sha>``: the hash covers config.json, the weight files' sizes and the recipe."""
    h = hashlib.sha256(RECIPE.encode())
    h.update((model_path / "config.json").read_bytes())
    for f in sorted(model_path.glob("*.safetensors")) + sorted(model_path.glob("*.bin")):
        h.update(f"{f.name}:{f.stat().st_size}".encode())
    return cache_root / f"{model.rstrip('/').split('/')[-1].lower()}-{h.hexdigest()[:12]}"


def ensure_export(profile: Profile, cache_dir: Path | None = None) -> Path:
    """The exported graph for ``profile.precision`` (``onnx-fp32``/``onnx-int8``), exporting it if missing.

    Returns its path; loads no session, so ingest can prepare what a first search will open.
    """
    from .st import resolve_model_path

    path = Path(resolve_model_path(profile.model, profile.allow_download))
    if not (path / "config.json").exists():
        raise EmbeddingError(
            f"{profile.precision} needs a local model directory; {profile.model!r} is not one",
            hint="give a local path in the profile, or use precision = 'fp32'",
        )
    out = model_cache_dir(profile.model, path, Path(cache_dir) if cache_dir else default_cache_root())
    model_file = out / FILES.get(profile.precision, INT8_FILE)
    if not model_file.exists():
        export_onnx(path, out)
    write_optimized(model_file)
    return model_file


__all__.append("ensure_export")


class OnnxEmbedder:
    """The profile's model as an ONNX graph (``profile.precision``: ``onnx-int8``, the default, or
    ``onnx-fp32``); same interface as ``SentenceTransformerEmbedder``."""

    def __init__(self, profile: Profile, cache_dir: Path | None = None) -> None:
        from .st import resolve_model_path

        self.profile = profile
        self.precision = profile.precision if profile.precision in FILES else "onnx-int8"
        path = Path(resolve_model_path(profile.model, profile.allow_download))
        if not (path / "config.json").exists():
            raise EmbeddingError(
                f"{self.precision} needs a local model directory; {profile.model!r} is not one",
                hint="give a local path in the profile, or use precision = 'fp32'",
            )
        self.model_dir = path
        self.cache_dir = model_cache_dir(profile.model, path, Path(cache_dir) if cache_dir else default_cache_root())
        model_file = self.cache_dir / FILES[self.precision]
        self.exported = not model_file.exists()
        if self.exported:
            export_onnx(path, self.cache_dir)
        self._pooling, self._normalize, max_len = _read_st_config(path)
        self._normalize = self._normalize or profile.normalize
        self._max_len = min(max_len or profile.max_tokens, profile.max_tokens)
        self._tok = _load_tokenizer(path, self._max_len)
        self._session = _open_session(model_file)
        self._feeds = [i.name for i in self._session.get_inputs()]

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([self.profile.document_prefix + t for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self._encode([self.profile.query_prefix + text])[0]

    def _encode(self, texts: list[str]) -> np.ndarray:
        """Tokenize all, run batches of similar length (less padding), put vectors back in input order."""
        out = np.zeros((len(texts), self.profile.dimension), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tok.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        size = max(1, self.profile.batch_size)
        for start in range(0, len(order), size):
            idx = order[start : start + size]
            vectors = self._run([encodings[i] for i in idx])
            if vectors.shape[1] != self.profile.dimension:
                raise dimension_mismatch(self.profile, int(vectors.shape[1]))
            out[idx] = vectors
        return out

    def _run(self, encodings: list[Any]) -> np.ndarray:
        width = max(len(e.ids) for e in encodings)
        arrays = {name: np.zeros((len(encodings), width), dtype=np.int64) for name in _INPUTS}
        for row, e in enumerate(encodings):
            n = len(e.ids)
            arrays["input_ids"][row, :n] = e.ids
            arrays["attention_mask"][row, :n] = e.attention_mask
            arrays["token_type_ids"][row, :n] = e.type_ids
        try:
            hidden = self._session.run(None, {k: arrays[k] for k in self._feeds})[0]
        except Exception as e:
            raise EmbeddingError(f"onnx embedding failed: {e}", hint=_HINT) from None
        v = _pool(hidden.astype(np.float32), arrays["attention_mask"], self._pooling)
        if self._normalize:
            v /= np.clip(np.linalg.norm(v, axis=1, keepdims=True), 1e-12, None)
        return v


def _pool(hidden: np.ndarray, mask: np.ndarray, mode: str) -> np.ndarray:
    if mode == "cls":
        return hidden[:, 0].copy()
    m = mask[..., None].astype(np.float32)
    return (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)


def _read_st_config(path: Path) -> tuple[str, bool, int | None]:
    """Pooling mode, whether a Normalize module follows, and max_seq_length, from the ST config files."""
    modules = _read_json(path / "modules.json") or []
    normalize = any(str(m.get("type", "")).endswith("Normalize") for m in modules)
    pool_dir = next((m.get("path", "") for m in modules if str(m.get("type", "")).endswith("Pooling")), "1_Pooling")
    pooling = _read_json(path / pool_dir / "config.json") or {"pooling_mode_mean_tokens": True}
    modes = [k for k, v in pooling.items() if k.startswith("pooling_mode_") and v]
    if modes == ["pooling_mode_mean_tokens"]:
        mode = "mean"
    elif modes == ["pooling_mode_cls_token"]:
        mode = "cls"
    else:
        raise EmbeddingError(f"the ONNX backend supports mean or CLS pooling, not {modes}", hint=_HINT)
    max_len = (_read_json(path / "sentence_bert_config.json") or {}).get("max_seq_length")
    return mode, normalize, int(max_len) if max_len else None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _load_tokenizer(path: Path, max_len: int) -> Any:
    tj = path / "tokenizer.json"
    if not tj.exists():
        raise EmbeddingError(f"no tokenizer.json in {path}", hint=_HINT)
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tj))
    tok.enable_truncation(max_length=max_len)
    tok.no_padding()  # padding is per batch, in _run
    return tok


def _open_session(model_file: Path) -> Any:
    """An onnxruntime session on ``model_file``, from its pre-optimized copy when there is one.

    Graph optimization takes about a third of a cold session's creation; the optimized graph is saved
    once next to the model (``optimized_copy``; ``prepare``/ingest writes it) and later sessions
    load it directly. Its name carries the onnxruntime version and the CPU's flags, as onnxruntime
    asks of offline-optimized models.
    """
    try:
        import onnxruntime as ort
    except ImportError:
        raise EmbeddingError("the ONNX backend needs onnxruntime, which is not installed", hint=_HINT) from None
    optimized = optimized_copy(model_file)
    try:
        if optimized.exists():
            try:
                return ort.InferenceSession(str(optimized), _session_options(ort), providers=["CPUExecutionProvider"])
            except Exception as e:  # a damaged copy only costs the optimization: fall back to the model
                log.warning("ignoring %s (%s)", optimized, _first_line(e))
        return ort.InferenceSession(str(model_file), _session_options(ort), providers=["CPUExecutionProvider"])
    except Exception as e:
        raise EmbeddingError(
            f"cannot load {model_file}: {e}", hint=f"delete {model_file.parent} to re-export"
        ) from None


def _session_options(ort: Any, save_to: Path | None = None) -> Any:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = os.cpu_count() or 1
    # Idle pool threads sleep instead of spinning: a query is embedded while PostgreSQL works on
    # the same cores (hybrid search), and spinning threads would take their time.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.log_severity_level = 3
    if save_to is not None:
        # Extended (not layout) optimizations are what onnxruntime saves portably for a CPU.
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        opts.optimized_model_filepath = str(save_to)
    return opts


def optimized_copy(model_file: Path) -> Path:
    """Where the pre-optimized graph of ``model_file`` lives for this onnxruntime and CPU."""
    import onnxruntime as ort

    tag = hashlib.sha256(f"{ort.__version__}|{' '.join(sorted(cpu_features()))}".encode()).hexdigest()[:10]
    return model_file.with_name(f"{model_file.stem}.opt-{tag}.onnx")


def write_optimized(model_file: Path) -> Path:
    """Save the optimized graph of ``model_file`` (atomically) so later sessions skip optimization."""
    import onnxruntime as ort

    target = optimized_copy(model_file)
    if target.exists():
        return target
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    try:
        ort.InferenceSession(str(model_file), _session_options(ort, save_to=tmp), providers=["CPUExecutionProvider"])
        os.replace(tmp, target)
    except Exception as e:  # optional: a session without it is only slower to open
        log.warning("could not save an optimized copy of %s: %s", model_file.name, _first_line(e))
    finally:
        tmp.unlink(missing_ok=True)
    return target


def _first_line(e: BaseException) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0]


def export_onnx(model_path: Path, out_dir: Path) -> Path:
    """Export the transformer to ONNX (fp32) and quantize it (int8); both files are written
    atomically into ``out_dir``. Returns the int8 file."""
    if not onnx_available():
        raise EmbeddingError("the ONNX backend needs the onnx and onnxruntime packages", hint=_HINT)
    out_dir.mkdir(parents=True, exist_ok=True)
    fp32 = out_dir / f"{FP32_FILE}.{os.getpid()}.tmp"
    int8 = out_dir / f"{INT8_FILE}.{os.getpid()}.tmp"
    log.info("exporting %s to ONNX (fp32 and int8) in %s (once)", model_path.name, out_dir)
    try:
        _export_fp32(model_path, fp32)
        _quantize(fp32, int8)
        os.replace(int8, out_dir / INT8_FILE)
        os.replace(fp32, out_dir / FP32_FILE)
    except EmbeddingError:
        raise
    except Exception as e:
        raise EmbeddingError(f"ONNX export of {model_path.name} failed: {str(e).splitlines()[0]}", hint=_HINT) from None
    finally:
        for f in (fp32, int8):
            f.unlink(missing_ok=True)
    return out_dir / INT8_FILE


export_int8 = export_onnx  # the name of earlier releases


def _export_fp32(model_path: Path, target: Path) -> None:
    import torch
    from transformers import AutoModel

    class _Hidden(torch.nn.Module):
        def __init__(self, model: Any) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # eager attention: a plain MatMul/Softmax graph that traces the padding mask faithfully
        model = AutoModel.from_pretrained(str(model_path), dtype=torch.float32, attn_implementation="eager")
        wrapper = _Hidden(model).eval()  # export restores the wrapper's mode: it must be eval, not train
        ids = torch.ones(2, 16, dtype=torch.long)
        mask = torch.ones(2, 16, dtype=torch.long)
        mask[1, 8:] = 0  # a padded example, so no all-ones-mask shortcut is traced
        axes = {name: {0: "batch", 1: "sequence"} for name in (*_INPUTS, "last_hidden_state")}
        with torch.no_grad():
            torch.onnx.export(
                wrapper,
                (ids, mask, torch.zeros_like(ids)),
                str(target),
                input_names=list(_INPUTS),
                output_names=["last_hidden_state"],
                dynamic_axes=axes,
                opset_version=17,
                dynamo=False,
            )


def _quantize(source: Path, target: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    graph = onnx.load(str(source), load_external_data=False).graph
    keep_fp32 = [n.name for n in graph.node if n.op_type == "MatMul" and _is_ffn_down(n.name)]
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # quantize_dynamic warns on the root logger about pre-processing
    try:
        quantize_dynamic(
            str(source),
            str(target),
            weight_type=QuantType.QUInt8,
            per_channel=True,
            reduce_range=False,
            op_types_to_quantize=["MatMul"],
            nodes_to_exclude=keep_fp32,
        )
    finally:
        root.setLevel(level)


def _is_ffn_down(node_name: str) -> bool:
    """The feed-forward output projection of a BERT layer (``/layer.N/output/dense/MatMul``)."""
    return node_name.endswith("/output/dense/MatMul") and "/attention/" not in node_name
