"""Plain text and Markdown.

Plain text (``source_type="text"``) keeps every paragraph (split on blank lines) as a block; its
title is the first non-empty line when shorter than 120 characters, else the file's stem.

Markdown (``source_type="markdown"``) keeps:

- front matter (YAML ``---`` or TOML ``+++``) as metadata, removed from the text; a block that
  does not parse is reported under ``front_matter_error`` and as a ``MetadataWarning`` note;
- headings (ATX ``#``…``######`` and Setext ``===``/``---``) as structure: each block carries the
  ``heading_path`` of the headings above it, the heading lines themselves are not in the text;
- fenced code blocks (````` ``` ````` or ``~~~``) whole, as one block, fences included;
- paragraphs, lists and tables as text, one block per run of non-blank lines;

and drops thematic breaks (``---``, ``***``). Title: front matter ``title``, else the first H1,
else the file's stem.

Both are UTF-8 (or UTF-16/32 with a BOM, or the charset a transport declared); fetched from a URL
that names no charset, bytes that are not UTF-8 are read as windows-1252 unless they are mostly
UTF-8 (``decode_source_text``).
"""

from __future__ import annotations

import re
from typing import Iterator, NamedTuple

from ..types import Block, Document, Source
from .base import build_document, decode_text, decode_web_text, is_url, split_paragraphs, stem_of
from .frontmatter import split_front_matter

__all__ = ["extract_text", "extract_markdown", "markdown_blocks", "MarkdownParts", "decode_source_text"]

_TITLE_MAX = 120
_FIRST_LINE = re.compile(r"\S[^\n]*")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_BREAK = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_NOT_SETEXT_TEXT = re.compile(r"^\s*(?:[-*+>|]|\d+[.)])\s")


def extract_text(source: Source) -> list[Document]:
    """A plain-text file as one document of paragraphs."""
    text = decode_source_text(source)
    m = _FIRST_LINE.search(text)  # not text.split("\n"): a second copy of a long file
    first = m.group(0).strip() if m else ""
    title = first if 0 < len(first) < _TITLE_MAX else stem_of(source.uri)
    blocks = [Block(p) for p in split_paragraphs(text)]
    del text  # the decoded whole is not needed once it is in paragraphs: the document joins them again
    return [build_document(source, title=title, blocks=blocks, source_type="text")]


def extract_markdown(source: Source) -> list[Document]:
    """A Markdown file as one document: front matter → metadata, headings → heading paths."""
    text = decode_source_text(source)
    meta, body, error = split_front_matter(text)
    parts = markdown_blocks(body)
    if error:
        meta["front_matter_error"] = error
    title = meta.get("title") if isinstance(meta.get("title"), str) else None
    title = title or parts.first_h1 or stem_of(source.uri)
    notes = (("MetadataWarning", f"front matter not read: {error}"),) if error else ()
    return [
        build_document(source, title=title, blocks=parts.blocks, source_type="markdown", metadata=meta, notes=notes)
    ]


def decode_source_text(source: Source) -> str:
    """The text of a plain-text or Markdown source: fetched from a URL, read as ``decode_web_text``
    reads it (windows-1252 when it names no charset and is not UTF-8); a file or stdin, as
    ``decode_text`` (refused when not UTF-8 and no charset was declared: see ``base``)."""
    charset = source.metadata.get("charset")
    if is_url(source.uri):
        return decode_web_text(source.content, (charset,), url=True)
    return decode_text(source.content, charset)


class MarkdownParts(NamedTuple):
    """The result of ``markdown_blocks``: the blocks and the text of the first H1 (or ``None``)."""

    blocks: list[Block]
    first_h1: str | None


class _Splitter:
    """Line-by-line state of ``markdown_blocks``: the open paragraph, fence and heading stack."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.lines: list[str] = []
        self.headings: list[tuple[int, str]] = []
        self.fence: str | None = None
        self.first_h1: str | None = None
        self.all_headings: list[str] = []

    def flush(self) -> None:
        """Close the open paragraph (or code block) as a block under the current headings."""
        if any(ln.strip() for ln in self.lines):
            path = tuple(t for _, t in self.headings)
            self.blocks.append(Block("\n".join(self.lines).strip("\n"), heading_path=path))
        self.lines = []

    def heading(self, level: int, text: str) -> None:
        """Enter a section: headings at this level or deeper are closed."""
        self.flush()
        text = text.strip()
        if not text:
            return
        while self.headings and self.headings[-1][0] >= level:
            self.headings.pop()
        self.headings.append((level, text))
        self.all_headings.append(text)
        if level == 1 and self.first_h1 is None:
            self.first_h1 = text

    def line(self, line: str) -> None:
        """Feed one line."""
        if self.fence is not None:
            self._in_fence(line)
        elif m := _FENCE_OPEN.match(line):
            self.flush()
            self.fence = m.group(1)
            self.lines.append(line)
        elif m := _ATX.match(line):
            self.heading(len(m.group(1)), m.group(2) or "")
        elif (m := _SETEXT.match(line)) and self._setext_candidate():
            self.heading(1 if m.group(1)[0] == "=" else 2, self.lines.pop().strip())
        elif _BREAK.match(line) or not line.strip():
            self.flush()
        else:
            self.lines.append(line)

    def _in_fence(self, line: str) -> None:
        self.lines.append(line)
        close = line.strip()
        fence = self.fence or ""
        if close.startswith(fence[0] * len(fence)) and not close.strip(fence[0]) and len(line) - len(line.lstrip()) < 4:
            self.fence = None
            self.flush()

    def _setext_candidate(self) -> bool:
        """A Setext underline only makes a heading of a one-line paragraph that is not a list item."""
        return len(self.lines) == 1 and not _NOT_SETEXT_TEXT.match(self.lines[0])


def markdown_blocks(text: str) -> MarkdownParts:
    """Split Markdown (without front matter) into blocks with heading paths.

    A document made of headings only gives one block holding the heading texts, so that it is
    not taken for an empty one.
    """
    s = _Splitter()
    for line in _lines(text):
        s.line(line)
    s.flush()
    if not s.blocks and s.all_headings:
        s.blocks.append(Block("\n".join(s.all_headings)))
    return MarkdownParts(s.blocks, s.first_h1)


def _lines(text: str) -> Iterator[str]:
    """``text.split("\\n")`` one line at a time: a long file's lines are never all held at once."""
    start = 0
    while (end := text.find("\n", start)) >= 0:
        yield text[start:end]
        start = end + 1
    yield text[start:]
