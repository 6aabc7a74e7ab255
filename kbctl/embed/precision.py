"""Choosing the numeric precision (and backend) of a model for ``precision = "auto"``.

Candidates, fastest first: ``onnx-int8`` (when onnx and onnxruntime import), ``bf16`` (only on CPUs
with native bfloat16: ``avx512_bf16`` or ``amx_bf16``; elsewhere it is emulated and slower than
fp32), ``onnx-fp32`` (fp32 math on onnxruntime: the same vectors to ~1e-6, faster than torch on CPU,
and a process that only embeds a query never imports torch), then ``fp32``. A candidate is accepted only if, on a fixed calibration set, every vector
stays within cosine 0.995 of the fp32 vector. The decision is cached as JSON in the model cache dir,
keyed by the profile's fingerprint, the kbctl version and the candidates, so it is measured once.

Precision is not part of the profile's fingerprint: vectors made at an accepted precision are
interchangeable with fp32 ones for search, so a namespace filled with fp32 can be queried with int8.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..config import Profile
from ..errors import EmbeddingError

__all__ = ["PrecisionChoice", "cpu_features", "candidates", "decide_precision", "choose_precision", "MIN_COSINE"]

log = logging.getLogger(__name__)

MIN_COSINE = 0.995

_BF16_FLAGS = {"avx512_bf16", "amx_bf16"}


@dataclass(frozen=True)
class PrecisionChoice:
    """What ``auto`` resolved to, and the agreement with fp32 it measured (1.0 for fp32 itself)."""

    precision: str
    min_cosine: float
    mean_cosine: float
    reason: str


def cpu_features(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The CPU's feature flags (``avx2``, ``avx512_bf16``…) from /proc/cpuinfo; empty if unreadable."""
    try:
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith(("flags", "Features")):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def candidates(features: set[str] | None = None) -> list[str]:
    """Precisions worth trying on this machine, fastest first; always ends with ``fp32``."""
    from .onnx import onnx_available

    features = cpu_features() if features is None else features
    onnx = onnx_available()
    out = ["onnx-int8"] if onnx else []
    if features & _BF16_FLAGS:
        out.append("bf16")
    if onnx:
        out.append("onnx-fp32")
    return out + ["fp32"]


def choose_precision(profile: Profile, home: Path | None = None) -> str:
    """The precision ``auto`` means for this profile on this machine (see ``decide_precision``)."""
    return decide_precision(profile, home).precision


def decide_precision(profile: Profile, home: Path | None = None) -> PrecisionChoice:
    """Validate the candidates against fp32 once, cache and return the fastest that agrees."""
    if profile.embedder != "sentence-transformers":
        return PrecisionChoice("fp32", 1.0, 1.0, f"{profile.embedder} embedder has no precision")
    if profile.precision != "auto":
        return PrecisionChoice(profile.precision, float("nan"), float("nan"), "set in the profile")
    order = candidates()
    if order == ["fp32"]:  # nothing to compare: no need to load the model twice or cache anything
        return PrecisionChoice("fp32", 1.0, 1.0, "no faster precision on this machine")
    cache = _cache_file(profile, home, order)
    choice = _read_cached(cache)
    if choice is None:
        choice = _validate(profile, home, order)
        _write_cached(cache, choice)
    log.info(
        "precision auto -> %s (min cosine %.4f, mean %.4f to fp32): %s",
        choice.precision, choice.min_cosine, choice.mean_cosine, choice.reason,
    )
    return choice


def _validate(profile: Profile, home: Path | None, order: list[str]) -> PrecisionChoice:
    from . import get_embedder

    reference = get_embedder(dataclasses.replace(profile, precision="fp32"), home=home)
    base = _unit(reference.embed_documents(CALIBRATION))
    rejected: list[str] = []
    for precision in order[:-1]:
        try:
            other = get_embedder(dataclasses.replace(profile, precision=precision), home=home)
            cos = (_unit(other.embed_documents(CALIBRATION)) * base).sum(axis=1)
        except EmbeddingError as e:
            rejected.append(f"{precision} unavailable ({e.message})")
            continue
        lo, mean = float(cos.min()), float(cos.mean())
        if lo >= MIN_COSINE:
            why = f"fastest candidate within cosine {MIN_COSINE} of fp32"
            return PrecisionChoice(precision, lo, mean, "; ".join([*rejected, why]))
        rejected.append(f"{precision} min cosine {lo:.4f} < {MIN_COSINE}")
    return PrecisionChoice("fp32", 1.0, 1.0, "; ".join(rejected) or "no faster precision on this machine")


def _unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    return v / np.clip(np.linalg.norm(v, axis=1, keepdims=True), 1e-12, None)


def _cache_file(profile: Profile, home: Path | None, order: list[str]) -> Path:
    from .. import __version__
    from .onnx import default_cache_root

    root = Path(home) / "models" if home else default_cache_root()
    key = json.dumps([profile.fingerprint, __version__, order, MIN_COSINE, len(CALIBRATION)])
    name = profile.model.rstrip("/").split("/")[-1].lower()
    return root / f"precision-{name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.json"


def _read_cached(path: Path) -> PrecisionChoice | None:
    try:
        return PrecisionChoice(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def _write_cached(path: Path, choice: PrecisionChoice) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(dataclasses.asdict(choice), indent=2), encoding="utf-8")
        tmp.replace(path)
    except OSError as e:  # a read-only cache only costs a re-validation next time
        log.warning("cannot cache the precision decision in %s: %s", path, e)


# Short and long, plain and technical, English text: where quantization error shows first.
_LONG = (
    "Alterations of the architecture of cerebral white matter in the developing human brain can "
    "affect cortical development and result in functional disabilities. A line scan diffusion-weighted "
    "magnetic resonance imaging sequence with diffusion tensor analysis was applied to measure the "
    "apparent diffusion coefficient, to calculate relative anisotropy, and to delineate three-dimensional "
    "fiber architecture in cerebral white matter in preterm and full-term infants. "
)
CALIBRATION: tuple[str, ...] = (
    "How long do refunds take?",
    "reset password",
    "The invoice was charged twice this month; please reverse the duplicate payment.",
    "Our API returns HTTP 429 when a client sends more than 100 requests per minute.",
    "To rotate the signing key, run `kbctl keys rotate --tenant acme` and restart the workers.",
    "The mitochondria is the powerhouse of the cell.",
    "Vitamin D supplementation did not reduce the incidence of fractures in older adults.",
    "Paris is the capital and most populous city of France.",
    "What is the difference between a mutex and a semaphore?",
    "I love this product, it works great and shipping was fast!",
    "The quarterly revenue grew 12% year over year, driven by subscription renewals.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "PostgreSQL uses multiversion concurrency control to give each transaction a snapshot.",
    "A cat sat on the mat.",
    "Error: connection refused (is the server running on port 5432?)",
    "Customers on the annual plan can cancel within 30 days for a full refund, after which refunds are "
    "prorated to the remaining months; contact billing support with your invoice number.",
    "The HNSW index trades recall for speed: raising ef_search improves recall at the cost of latency.",
    "Gene expression profiling identified a signature associated with poor prognosis in breast cancer.",
    "Smoking cessation reduces the risk of cardiovascular disease within a few years.",
    "Deploy the service behind a load balancer with health checks on /healthz every ten seconds.",
    "The treaty was signed in 1648, ending the Thirty Years' War in Europe.",
    "Neural networks learn representations by gradient descent on a differentiable loss function.",
    "Is it safe to take ibuprofen with coffee?",
    "Quarterly maintenance: replace the air filters, check the refrigerant level and clean the coils.",
    "Kubernetes restarts a container when its liveness probe fails three times in a row.",
    "The committee will meet on Tuesday to review the budget proposal and vote on amendments.",
    "Sea levels are rising because of thermal expansion of the oceans and melting land ice.",
    "Type 2 diabetes is characterised by insulin resistance and relative insulin deficiency.",
    _LONG,
    _LONG * 3,  # longer than max_tokens: exercises truncation
    "Section 4.2 Data retention. " + "Records are kept for seven years and then deleted. " * 12,
    "Q: Can I change my plan mid-cycle? A: Yes; the difference is prorated on the next invoice. " * 4,
)
