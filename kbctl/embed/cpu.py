"""The CPU's feature flags, which decide the precision candidates and name optimized ONNX graphs."""

from __future__ import annotations

from pathlib import Path

__all__ = ["cpu_features"]


def cpu_features(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The CPU's feature flags (``avx2``, ``avx512_bf16``…) from /proc/cpuinfo; empty if unreadable."""
    try:
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith(("flags", "Features")):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()
