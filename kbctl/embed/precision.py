"""Choosing the numeric precision (and backend) of a model for ``precision = "auto"``.

``auto`` makes two decisions, recorded together:

- **throughput** (ingest, ``kbctl embed``, eval imports, re-embedding): the fastest backend per text
  that this CPU runs and that agrees with fp32;
- **query** (one query in a short-lived process, such as a cold ``kbctl search``): the backend that
  *loads* fastest among those that agree with fp32. Loading dominates there: torch and
  sentence-transformers cost about 5 s and 350 MB before the first vector, an ONNX session about
  0.2 s. So the query backend is ``onnx-fp32`` (the same computation as fp32), else ``onnx-int8``,
  and never torch while an ONNX backend agrees; without ONNX it is ``fp32``.

Both use the same rule, so a query vector and the namespace's stored vectors are each within
cosine 0.995 of the fp32 vector of their text.

Throughput candidates, fastest first: ``onnx-int8`` (when onnx and onnxruntime import), ``bf16`` (only on CPUs
with native bfloat16: ``avx512_bf16`` or ``amx_bf16``; elsewhere it is emulated and slower than
fp32), ``onnx-fp32`` (fp32 math on onnxruntime: the same vectors to ~1e-6, faster than torch on CPU,
and a process that only embeds a query never imports torch), then ``fp32``. A candidate is accepted only if, on a fixed calibration set, every vector
stays within cosine 0.995 of the fp32 vector. The decision is cached as JSON in the model cache dir
(``<home>/models`` unless ``models.cache_dir`` says otherwise), keyed by the profile's fingerprint,
the kbctl version and the candidates, so it is measured once: ``kbctl ingest`` prepares it (and the
ONNX export) before anything is embedded, so a first search finds it ready.

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
from typing import Any, Callable

import numpy as np

from .._version import __version__
from ..config import Profile
from ..errors import EmbeddingError
from .cpu import cpu_features
from .onnx import default_cache_root, onnx_available

__all__ = [
    "PrecisionChoice",
    "cpu_features",
    "candidates",
    "decide_precision",
    "choose_precision",
    "cached_decision",
    "MIN_COSINE",
    "QUERY_ORDER",
    "Load",
]

#: How to load the embedder of a profile: ``kbctl.embed.get_embedder``, passed in by the package
#: (which imports this module, so this module cannot import it back).
Load = Callable[..., Any]

log = logging.getLogger(__name__)

MIN_COSINE = 0.995

_BF16_FLAGS = {"avx512_bf16", "amx_bf16"}
# Query backends by load time, fastest first (both ONNX backends open a session in ~0.2 s; fp32 is
# preferred between them because it is the more faithful). torch is the fallback, never the choice.
QUERY_ORDER = ("onnx-fp32", "onnx-int8")
_LOGGED: set[Path] = set()  # decisions already reported in this process (-v)
# Bumped when the recorded decision changes shape, so older cache files are re-measured.
_DECISION_FORMAT = 2


@dataclass(frozen=True)
class PrecisionChoice:
    """What ``auto`` resolved to, and the agreement with fp32 it measured (1.0 for fp32 itself).

    ``precision`` is the throughput backend; ``query_precision`` the backend for embedding a query
    in a short-lived process (see the module docstring), with its own measured agreement and reason.
    """

    precision: str
    min_cosine: float
    mean_cosine: float
    reason: str
    query_precision: str = ""
    query_min_cosine: float = float("nan")
    query_reason: str = ""
    cpu_flags: tuple[str, ...] = ()

    def for_purpose(self, purpose: str) -> str:
        """The precision to load for ``purpose`` (``"throughput"`` or ``"query"``)."""
        return (self.query_precision or self.precision) if purpose == "query" else self.precision


def candidates(features: set[str] | None = None) -> list[str]:
    """Precisions worth trying on this machine, fastest first; always ends with ``fp32``."""
    features = cpu_features() if features is None else features
    onnx = onnx_available()
    out = ["onnx-int8"] if onnx else []
    if features & _BF16_FLAGS:
        out.append("bf16")
    if onnx:
        out.append("onnx-fp32")
    return out + ["fp32"]


def choose_precision(
    profile: Profile, cache_dir: Path | None = None, purpose: str = "throughput", *, load: Load
) -> str:
    """The precision ``auto`` means for this profile on this machine and purpose (see ``decide_precision``)."""
    return decide_precision(profile, cache_dir, load=load).for_purpose(purpose)


def decide_precision(profile: Profile, cache_dir: Path | None = None, *, load: Load) -> PrecisionChoice:
    """Validate the candidates against fp32 once, cache and return both decisions.

    ``cache_dir`` is the model cache (``<home>/models``); ``None`` means the user cache dir.
    ``load`` loads a profile's embedder to measure it (``kbctl.embed.get_embedder``).
    """
    features = cpu_features()
    order = candidates(features)
    fixed = _fixed_choice(profile, features, order)
    if fixed is not None:
        return fixed
    cache = _cache_file(profile, cache_dir, order)
    choice = _read_cached(cache)
    if choice is None:
        log.info(
            "preparing %s on this machine (once): measuring its backends against fp32 into %s",
            profile.model,
            cache.parent,
        )
        choice = dataclasses.replace(_validate(profile, cache_dir, order, load), cpu_flags=_flags(features))
        _write_cached(cache, choice)
    if cache in _LOGGED:
        return choice
    _LOGGED.add(cache)
    log.info(
        "precision auto -> %s for throughput (min cosine %.4f to fp32: %s); %s for queries (%s)",
        choice.precision,
        choice.min_cosine,
        choice.reason,
        choice.query_precision,
        choice.query_reason,
    )
    return choice


def cached_decision(profile: Profile, cache_dir: Path | None = None) -> PrecisionChoice | None:
    """The recorded ``auto`` decision for this profile on this machine, without measuring anything."""
    features = cpu_features()
    order = candidates(features)
    fixed = _fixed_choice(profile, features, order)
    return fixed if fixed is not None else _read_cached(_cache_file(profile, cache_dir, order))


def _fixed_choice(profile: Profile, features: set[str], order: list[str]) -> PrecisionChoice | None:
    """The decision when there is nothing to measure (no ``auto``, or no candidate but fp32), else None."""
    if profile.embedder != "sentence-transformers":
        return PrecisionChoice("fp32", 1.0, 1.0, f"{profile.embedder} embedder has no precision")
    if profile.precision != "auto":
        return PrecisionChoice(
            profile.precision,
            float("nan"),
            float("nan"),
            "set in the profile",
            profile.precision,
            float("nan"),
            "set in the profile",
        )
    if order == ["fp32"]:  # nothing to compare: no need to load the model twice or cache anything
        why = "no faster precision on this machine"
        return PrecisionChoice("fp32", 1.0, 1.0, why, "fp32", 1.0, why, _flags(features))
    return None


def _flags(features: set[str]) -> tuple[str, ...]:
    """The CPU flags that decide the candidates (recorded with the decision)."""
    return tuple(sorted(features & (_BF16_FLAGS | {"avx2", "avx512f", "avx512_vnni", "amx_int8"})))


def _validate(profile: Profile, cache_dir: Path | None, order: list[str], load: Load) -> PrecisionChoice:
    """Measure each candidate needed against fp32: the throughput order until one agrees, then the
    query order (load time) until one agrees. Each backend is measured at most once."""
    reference = load(dataclasses.replace(profile, precision="fp32"), cache_dir=cache_dir)
    base = _unit(reference.embed_documents(CALIBRATION))
    measured: dict[str, tuple[float, float] | str] = {}

    def check(precision: str) -> tuple[float, float] | str:
        if precision not in measured:
            try:
                other = load(dataclasses.replace(profile, precision=precision), cache_dir=cache_dir)
                cos = (_unit(other.embed_documents(CALIBRATION)) * base).sum(axis=1)
                measured[precision] = (float(cos.min()), float(cos.mean()))
            except EmbeddingError as e:
                measured[precision] = f"{precision} unavailable ({e.message})"
        return measured[precision]

    def why_not(precision: str) -> str:
        m = measured[precision]
        return m if isinstance(m, str) else f"{precision} min cosine {m[0]:.4f} < {MIN_COSINE}"

    throughput = PrecisionChoice("fp32", 1.0, 1.0, "no faster precision on this machine")
    rejected: list[str] = []
    for precision in order[:-1]:
        m = check(precision)
        if not isinstance(m, str) and m[0] >= MIN_COSINE:
            why = f"fastest candidate within cosine {MIN_COSINE} of fp32"
            throughput = PrecisionChoice(precision, m[0], m[1], "; ".join([*rejected, why]))
            break
        rejected.append(why_not(precision))
    else:
        if rejected:
            throughput = dataclasses.replace(throughput, reason="; ".join(rejected))
    q_rejected: list[str] = []
    for precision in (p for p in QUERY_ORDER if p in order):
        m = check(precision)
        if not isinstance(m, str) and m[0] >= MIN_COSINE:
            why = f"loads fastest (no torch) within cosine {MIN_COSINE} of fp32"
            return dataclasses.replace(
                throughput, query_precision=precision, query_min_cosine=m[0], query_reason="; ".join([*q_rejected, why])
            )
        q_rejected.append(why_not(precision))
    why = "; ".join([*q_rejected, "no ONNX backend agrees: fp32 (torch) is the most faithful"])
    return dataclasses.replace(throughput, query_precision="fp32", query_min_cosine=1.0, query_reason=why)


def _unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    return v / np.clip(np.linalg.norm(v, axis=1, keepdims=True), 1e-12, None)


def _cache_file(profile: Profile, cache_dir: Path | None, order: list[str]) -> Path:
    root = Path(cache_dir) if cache_dir else (Path(profile.cache_dir) if profile.cache_dir else default_cache_root())
    key = json.dumps([profile.fingerprint, __version__, order, MIN_COSINE, len(CALIBRATION), _DECISION_FORMAT])
    name = profile.model.rstrip("/").split("/")[-1].lower()
    return root / f"precision-{name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.json"


def _read_cached(path: Path) -> PrecisionChoice | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        data["cpu_flags"] = tuple(data.get("cpu_flags", ()))
        return PrecisionChoice(**data)
    except (OSError, ValueError, TypeError, AttributeError):
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
