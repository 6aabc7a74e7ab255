"""Folders of files written at test time: ``make_tree(root, {"docs/a.md": "text"})``."""

from __future__ import annotations

from pathlib import Path


def make_tree(root: Path, files: dict[str, str]) -> Path:
    """``root`` with each of ``files`` (a path relative to it, its text) written, folders made as needed."""
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root
