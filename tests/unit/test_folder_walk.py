"""Folder walks stay inside the folder given, and never block on pipes, sockets or devices."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import threading

import pytest

from kbctl.ingest.fetch import FetchOptions, fetch, iter_files, list_uris
from kbctl.types import ItemError, Source
from tests.filetree import make_tree


@pytest.fixture
def escaping(tmp_path):
    """``kb/`` with links that leave it (to /etc, to a file in /etc, to a sibling folder) and links
    that stay inside it."""
    make_tree(tmp_path / "outside", {"secret.md": "secret", "deep/more.md": "more"})
    root = make_tree(tmp_path / "kb", {"a.md": "a", "docs/b.md": "b"})
    (root / "passwd.txt").symlink_to("/etc/passwd")
    (root / "docs" / "etc").symlink_to("/etc", target_is_directory=True)
    (root / "secret.md").symlink_to(tmp_path / "outside" / "secret.md")
    (root / "out").symlink_to(tmp_path / "outside", target_is_directory=True)
    (root / "up").symlink_to("..", target_is_directory=True)  # kb/up -> tmp_path, the parent
    (root / "alias.md").symlink_to("a.md")  # inside: followed
    (root / "docs-again").symlink_to("docs", target_is_directory=True)  # inside: the folder is walked once
    return root


def test_links_leaving_the_folder_are_skipped_and_recorded(escaping):
    got = list(fetch([str(escaping)]))
    sources = [g for g in got if isinstance(g, Source)]
    errors = [g for g in got if isinstance(g, ItemError)]
    real_root = os.path.realpath(escaping)
    assert all(os.path.realpath(s.metadata["abs_path"]).startswith(real_root + os.sep) for s in sources)
    assert [s.metadata["path"] for s in sources] == ["a.md", "alias.md", "docs/b.md"]
    assert {e.source: e.error_class for e in errors} == {
        f"file://{escaping}/docs/etc": "SourceError",
        f"file://{escaping}/out": "SourceError",
        f"file://{escaping}/passwd.txt": "SourceError",
        f"file://{escaping}/secret.md": "SourceError",
        f"file://{escaping}/up": "SourceError",
    }
    by_source = {e.source: e.message for e in errors}
    assert by_source[f"file://{escaping}/passwd.txt"] == (
        f"skipped {escaping}/passwd.txt: a symlink to /etc/passwd, outside {real_root} (--follow-symlinks to take it)"
    )
    assert all("\n" not in m for m in by_source.values())


def test_follow_symlinks_takes_them(escaping):
    got = list(fetch([str(escaping)], exclude=["docs/etc", "up"], options=FetchOptions(follow_symlinks=True)))
    assert all(isinstance(g, Source) for g in got), got
    paths = [s.metadata["path"] for s in got]
    assert paths == ["a.md", "alias.md", "docs/b.md", "out/deep/more.md", "out/secret.md", "passwd.txt", "secret.md"]


def test_list_uris_and_iter_files_agree_with_the_walk(escaping):
    assert list_uris([str(escaping)]) == {f"file://{escaping}/{p}" for p in ("a.md", "alias.md", "docs/b.md")}
    walked = [p for p in iter_files(escaping) if not isinstance(p, ItemError)]
    assert walked == [escaping / "a.md", escaping / "alias.md", escaping / "docs" / "b.md"]
    followed = list_uris([str(escaping)], exclude=["docs/etc", "up"], options=FetchOptions(follow_symlinks=True))
    assert f"file://{escaping}/passwd.txt" in followed and f"file://{escaping}/out/secret.md" in followed


def test_a_root_that_is_itself_a_link_is_walked(escaping, tmp_path):
    (tmp_path / "kb-link").symlink_to(escaping, target_is_directory=True)
    got = [g for g in fetch([str(tmp_path / "kb-link")]) if isinstance(g, Source)]
    assert [s.metadata["path"] for s in got] == ["a.md", "alias.md", "docs/b.md"]


def _bounded(fn, seconds: float = 5.0):
    """``fn()`` in a thread; fails the test (instead of hanging it) if it has not returned in time."""
    box: dict = {}
    t = threading.Thread(target=lambda: box.setdefault("value", fn()), daemon=True)
    t.start()
    t.join(seconds)
    return t.is_alive(), box.get("value")


def test_fifos_and_sockets_are_skipped_without_blocking(tmp_path):
    root = make_tree(tmp_path / "kb", {"a.md": "a", "sub/b.md": "b"})
    fifos = [root / ".kbctlignore", root / "pipe.md", root / "sub" / ".kbctlignore"]
    for f in fifos:
        os.mkfifo(f)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "sock.md"))
    try:
        blocked, got = _bounded(lambda: list(fetch([str(root)])))
    finally:
        for f in fifos:  # a reader blocked in open() gets EOF: the test never hangs the session
            with contextlib.suppress(OSError):
                os.close(os.open(f, os.O_WRONLY | os.O_NONBLOCK))
        sock.close()
    assert not blocked, "the walk blocked on a FIFO"
    assert [s.metadata["path"] for s in got if isinstance(s, Source)] == ["a.md", "sub/b.md"]
    errors = {e.source: e.message for e in got if isinstance(e, ItemError)}
    assert errors == {
        f"file://{root}/pipe.md": f"skipped {root}/pipe.md: a FIFO, not a regular file",
        f"file://{root}/sock.md": f"skipped {root}/sock.md: a socket, not a regular file",
    }
    assert all(stat.S_ISFIFO(os.stat(f).st_mode) for f in fifos)


def test_a_device_link_is_skipped_even_when_links_are_followed(tmp_path):
    root = make_tree(tmp_path / "kb", {"a.md": "a"})
    (root / "zero.txt").symlink_to("/dev/zero")
    blocked, got = _bounded(lambda: list(fetch([str(root)], options=FetchOptions(follow_symlinks=True))))
    assert not blocked
    assert [type(g).__name__ for g in got] == ["Source", "ItemError"]
    assert got[1].message == f"skipped {root}/zero.txt: a character device, not a regular file"
