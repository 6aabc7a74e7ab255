"""Plain text and Markdown.

Plain text (``source_type="text"``) keeps every paragraph (split on blank lines) as a block; its
title is the first non-empty line when shorter than 120 characters, else the file's stem.

Markdown (``source_type="markdown"``) keeps:

- front matter (YAML ``---`` or TOML ``+++``) as metadata, removed from the text; a block that
  does not parse is reported under ``front_matter_error`` and as a ``MetadataWarning`` note;
- headings (ATX ``#``…``######`` and Setext ``===``/``---``) as structure: each block carries the
  ``heading_path`` of the headings above it, the heading lines themselves are not in the text;
- fenced code blocks (````` ``` ````` or ``~~~``) whole, as one block, fences included;
- indented code blocks (lines indented by four spaces or a tab, where CommonMark reads them as
  code: after a blank line, a heading or a fence, not a paragraph's lazy continuation nor a list
  item's own text) as a fenced block with no info string, their four columns of indent removed, so
  the chunker cuts them as code; its fence is longer than any backtick fence it shows (the HTML
  extractor's Markdown, trafilatura's, fences its code and is read without this: ``indented_code``);
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
#: A list item's marker (tabs expanded): its indent, the marker and the spaces after it.
_LIST_ITEM = re.compile(r"( {0,3})([-*+]|\d{1,9}[.)])( +|$)")
_LEADING_BACKTICKS = re.compile(r" {0,3}(`*)")


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

    def __init__(self, indented_code: bool = True) -> None:
        self.blocks: list[Block] = []
        self.lines: list[str] = []
        self.headings: list[tuple[int, str]] = []
        self.fence: str | None = None
        self.first_h1: str | None = None
        self.all_headings: list[str] = []
        self.indented_code = indented_code
        self.code: list[str] | None = None  # an open indented code block's lines, indent removed
        self.list_column: int | None = None  # the content column of the open list's outermost item
        self.after_blank = True

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
            return
        if self.code is not None:
            if not line.strip() or _indent(line) >= 4:
                self.code.append(_dedent(line) if line.strip() else "")
                return
            self.close_code()
        blank = not line.strip()
        if not blank and self.indented_code:
            self._follow_list(line)
        if self.indented_code and not blank and not self.lines and self.list_column is None and _indent(line) >= 4:
            self.code = [_dedent(line)]
        else:
            self._line(line)
        self.after_blank = blank

    def close_code(self) -> None:
        """Close an open indented code block as a fenced block (its blank lines at the end left out)."""
        if self.code is None:
            return
        code, self.code = self.code, None
        while code and not code[-1]:
            code.pop()
        ticks = max((len(m.group(1)) for ln in code if (m := _LEADING_BACKTICKS.match(ln))), default=0)
        fence = "`" * max(3, ticks + 1)
        self.lines = [fence, *code, fence]
        self.flush()

    def _follow_list(self, line: str) -> None:
        """Track whether a list is open (its items' text, indented, is no code): an item opens or
        continues it; a line indented less than its items' text after a blank line, a heading, a
        fence or a break ends it."""
        expanded = line.expandtabs(4)
        item = _LIST_ITEM.match(expanded)
        indent = len(expanded) - len(expanded.lstrip(" "))
        if item and (self.list_column is None or indent < self.list_column) and not _BREAK.match(line):
            spaces = len(item.group(3))
            self.list_column = len(item.group(1)) + len(item.group(2)) + (spaces if 1 <= spaces <= 4 else 1)
        elif self.list_column is not None and indent < self.list_column and self._ends_list(line):
            self.list_column = None

    def _ends_list(self, line: str) -> bool:
        return self.after_blank or any(p.match(line) for p in (_ATX, _FENCE_OPEN, _BREAK))

    def _line(self, line: str) -> None:
        if m := _FENCE_OPEN.match(line):
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


def markdown_blocks(text: str, *, indented_code: bool = True) -> MarkdownParts:
    """Split Markdown (without front matter) into blocks with heading paths.

    A document made of headings only gives one block holding the heading texts, so that it is
    not taken for an empty one. With ``indented_code``, an indented code block is a fenced block.
    """
    s = _Splitter(indented_code)
    for line in _lines(text):
        s.line(line)
    s.close_code()
    s.flush()
    if not s.blocks and s.all_headings:
        s.blocks.append(Block("\n".join(s.all_headings)))
    return MarkdownParts(s.blocks, s.first_h1)


def _indent(line: str) -> int:
    """The columns of a line's leading spaces and tabs (a tab to the next multiple of four)."""
    col = 0
    for c in line:
        if c == " ":
            col += 1
        elif c == "\t":
            col = col // 4 * 4 + 4
        else:
            break
    return col


def _dedent(line: str) -> str:
    """A code line without its first four columns of indent (a tab reaches the next multiple of four,
    so none spans the fourth)."""
    col = 0
    for i, c in enumerate(line):
        if col >= 4 or c not in " \t":
            return line[i:]
        col = col + 1 if c == " " else col // 4 * 4 + 4
    return ""


def _lines(text: str) -> Iterator[str]:
    """``text.split("\\n")`` one line at a time: a long file's lines are never all held at once."""
    start = 0
    while (end := text.find("\n", start)) >= 0:
        yield text[start:end]
        start = end + 1
    yield text[start:]
