"""What this machine has room for: the memory available to new processes now and the CPUs this
process may run on, read where the system says it, with portable fallbacks (no dependency).

``kbctl ingest --workers N`` starts N processes, each loading the embedding model: these figures
bound N so that the workers neither swap nor meet the OOM killer. Every reader takes its sources
as arguments, so a caller (a test) can give them instead of the machine's."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["available_memory", "cpu_count"]


def available_memory(
    meminfo: Path = Path("/proc/meminfo"),
    cgroup: Path = Path("/sys/fs/cgroup"),
) -> int | None:
    """Bytes that new processes can take without swapping: ``MemAvailable`` of /proc/meminfo where
    the kernel gives it (free memory plus the page cache it can reclaim), else the free physical
    pages (``os.sysconf``); within a cgroup v2 memory limit (a container's), no more than the limit
    leaves. ``None`` when nothing says (then nothing is capped by memory)."""
    room = _meminfo_available(meminfo)
    if room is None:
        room = _sysconf_available()
    limited = _cgroup_room(cgroup)
    if limited is not None:
        room = limited if room is None else min(room, limited)
    return room


def cpu_count() -> int:
    """The CPUs this process may run on (its scheduler affinity: a container's or ``taskset``'s
    cpuset), else the machine's, at least 1."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):  # not on Linux
        return max(os.cpu_count() or 1, 1)


def _meminfo_available(meminfo: Path) -> int | None:
    try:
        text = meminfo.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name == "MemAvailable":
            parts = value.split()
            if parts and parts[0].isdigit():
                return int(parts[0]) * (1024 if parts[1:] in ([], ["kB"]) else 1)
    return None  # a kernel before 3.14 has no MemAvailable


def _sysconf_available() -> int | None:
    try:
        pages, size = os.sysconf("SC_AVPHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    return pages * size if pages > 0 and size > 0 else None


def _cgroup_room(cgroup: Path) -> int | None:
    """What a cgroup v2 ``memory.max`` leaves: the limit less ``memory.current``, of which the
    inactive page cache (``inactive_file`` of ``memory.stat``) counts as free, as the kernel
    reclaims it before it kills; None without a limit (``max``) or cgroup v2."""
    try:
        limit = (cgroup / "memory.max").read_text().strip()
        used = (cgroup / "memory.current").read_text().strip()
    except OSError:
        return None
    if not limit.isdigit() or not used.isdigit():  # "max": no limit
        return None
    reclaimable = 0
    try:
        for line in (cgroup / "memory.stat").read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == "inactive_file" and value.strip().isdigit():
                reclaimable = int(value)
    except OSError:
        pass
    return max(int(limit) - int(used) + reclaimable, 0)
