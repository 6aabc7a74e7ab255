"""Render an HTML report to PNG with headless Chromium (for docs and CI artefacts).

Chromium runs offline-minded: no GPU, no sync, no background networking, a throw-away profile.
``python -m kbctl.evals.screenshot report.html report.png`` does the same from a shell.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from kbctl.errors import KbctlError, UsageError

__all__ = ["find_chromium", "screenshot_html", "png_size"]

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    """Path of a Chromium/Chrome binary on PATH, or None."""
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def screenshot_html(
    html_path: Path,
    png_path: Path,
    width: int = 1280,
    height: int = 2000,
    chromium: str | None = None,
    timeout: float = 120.0,
) -> Path:
    """Screenshot ``html_path`` (a local file) at ``width``×``height`` into ``png_path``."""
    binary = chromium or find_chromium()
    if binary is None:
        raise UsageError("Chromium is not installed", hint="apt-get install chromium")
    png_path = Path(png_path).resolve()
    png_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kbctl-chromium-") as profile:
        cmd = [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            f"--screenshot={png_path}",
            f"--window-size={width},{height}",
            Path(html_path).resolve().as_uri(),
        ]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise KbctlError(f"Chromium failed to run: {exc}") from exc
    if proc.returncode != 0 or not png_path.is_file():
        tail = (proc.stderr or "").strip().splitlines()[-3:]
        raise KbctlError(f"Chromium did not write {png_path}: {' | '.join(tail)}")
    return png_path


def png_size(path: Path) -> tuple[int, int]:
    """``(width, height)`` read from a PNG's IHDR chunk."""
    head = Path(path).read_bytes()[:24]
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ValueError(f"{path} is not a PNG file")
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


if __name__ == "__main__":  # pragma: no cover
    if len(sys.argv) != 3:
        sys.exit("usage: python -m kbctl.evals.screenshot REPORT.html OUT.png")
    print(screenshot_html(Path(sys.argv[1]), Path(sys.argv[2])))
