"""HTML pages (``source_type="html"``).

The main content is found by trafilatura (precision favoured, comments left out): site chrome such
as navigation, breadcrumbs, sidebars and footers is dropped. It is read as Markdown, so headings
become ``heading_path``s, code blocks stay whole, and tables stay as Markdown tables; Markdown
escapes (``E\\_RATE\\_LIMITED``) and bold markers are removed so identifiers stay searchable.
When trafilatura finds nothing, or the page is over 2 million characters (trafilatura takes minutes
on those), the whole ``<body>`` (minus scripts, styles, ``nav``, ``header``, ``footer``, ``aside`` and
forms) is taken as paragraphs, read with lxml without its depth and text-size limits; when even
that finds no text (a nest deeper than libxml2's 2048 levels), the page's tags are stripped. Either
fallback is recorded in the ``extract_note`` metadata.

Metadata: ``author``, ``date`` (only a date the page states, never a guess), ``description``,
``tags`` (``<meta name="keywords">``, ``article:tag``), ``categories``, ``sitename``,
``language``. Title: the page's title as trafilatura cleans it, else ``<title>``, else the first
``<h1>``, else the file's stem.

``html_paragraphs`` (lxml only) turns an HTML fragment — an e-mail body, a feed entry — into
paragraphs, keeping all of its text.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from ..types import Block, Document, Source
from .base import build_document, decode_web_text, is_url, stem_of
from .tables import table_header, tidy_table
from .text import markdown_blocks

__all__ = ["extract_html", "html_paragraphs", "decode_html"]

log = logging.getLogger(__name__)

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
_MD_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|~<>])")
_MD_ESCAPE_IN_TABLE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!~<>])")  # ``\|`` stays: it is a cell's own bar
_CELL_BAR = re.compile(r"(?<!\\)\|")
_BARE_PRE = re.compile(r"(<pre\b[^>]*>)(?!\s*<code\b)(.*?)(</pre\s*>)", re.I | re.S)
_PRE = re.compile(r"(<pre\b[^>]*>)(.*?)(</pre\s*>)", re.I | re.S)
_EMPTY_LINE = re.compile(r"(?<=\n)(?=\r?\n)")
#: What an empty line of a ``<pre>`` holds while trafilatura reads the page (it drops empty lines
#: from code blocks), emptied again in its Markdown: a word no page has (trafilatura strips
#: private-use and control characters, and a line of spaces is no mark).
_BLANK = "kbctl-empty-line-5e0c1f"
_BLANK_LINE = re.compile(rf"^[ \t]*{_BLANK}[ \t]*$", re.M)
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_BLOCK_TAGS = (
    "p",
    "div",
    "section",
    "article",
    "main",
    "li",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "tr",
    "table",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "pre",
    "blockquote",
    "figure",
    "figcaption",
    "hr",
    "header",
    "footer",
    "address",
    "details",
    "summary",
)
_NOISE_TAGS = ("script", "style", "noscript", "template", "head", "svg", "iframe", "object")
_CHROME_TAGS = ("nav", "header", "footer", "aside", "form")
# Above this, trafilatura is not tried (it takes minutes on an 8 MB page) and metadata is read from
# the page's first characters only; the body fallback (lxml, then tag stripping) reads the whole page.
_LARGE_PAGE_CHARS = 2_000_000
_NOISE_ELEMENTS = re.compile(r"<(head|script|style|noscript|template)\b.*?</\1\s*>|<!--.*?-->", re.I | re.S)
_BLOCK_TAG = re.compile(rf"</?(?:{'|'.join(_BLOCK_TAGS)})\b[^>]*>|<br\b[^>]*>", re.I)
_ANY_TAG = re.compile(r"<[^>]*>")
_META_KEYS = ("author", "date", "description", "tags", "categories", "sitename", "language")


def extract_html(source: Source) -> list[Document]:
    """One HTML page as one document of its main content."""
    url = source.uri if is_url(source.uri) else None
    markup = decode_html(source.content, source.metadata.get("charset"), url=url is not None)
    large = len(markup) > _LARGE_PAGE_CHARS
    meta = _page_metadata(markup[:_LARGE_PAGE_CHARS] if large else markup, url)
    parts = markdown_blocks((None if large else _main_markdown(markup, url)) or "", indented_code=False)
    blocks = [_clean_block(b) for b in parts.blocks]
    fallback_title = parts.first_h1
    if not blocks:
        paragraphs, fallback_title = _body_paragraphs(markup)
        why = (
            f"page too large for trafilatura ({len(markup):,} characters)"
            if large
            else "trafilatura found no main content"
        )
        meta["extract_note"] = f"{why}: the text of the whole <body> (lxml)"
        if not paragraphs:
            paragraphs = _stripped_paragraphs(markup)
            meta["extract_note"] = f"{why}, nor lxml any text: the page's text with its tags stripped"
        log.info("%s: %s", source.uri, meta["extract_note"])
        blocks = [Block(p) for p in paragraphs]
    title = meta.pop("title", None) or fallback_title or stem_of(source.uri)
    return [build_document(source, title=title, blocks=blocks, source_type="html", metadata=meta)]


def decode_html(data: bytes, charset: str | None = None, *, url: bool = False) -> str:
    """HTML bytes as text: a BOM, else UTF-8, else the transport's charset, else the ``<meta>`` one
    (a server's header is wrong more often than the page's own word), else, for a page that
    declares none Python knows, windows-1252: the HTML standard's fallback, what old pages and
    Windows tools wrote. Bytes mostly UTF-8 with a damaged one are refused, not guessed at
    (``base.decode_web_text``; the hint is for a URL when the page was fetched from one)."""
    m = _META_CHARSET.search(data[:4096])
    meta = m.group(1).decode("ascii", "replace") if m else None
    return decode_web_text(data, (charset, meta), url=url)


def _main_markdown(markup: str, url: str | None) -> str | None:
    """The main content as Markdown, or ``None`` when trafilatura finds none."""
    import trafilatura  # heavy; only for HTML

    # a <pre> without <code> comes out unfenced, its "# comment" lines read back as headings
    markup = _BARE_PRE.sub(r"\1<code>\2</code>\3", markup)
    # and it drops a code block's empty lines: each holds a mark while it reads, removed after
    markup = _PRE.sub(lambda m: m.group(1) + _EMPTY_LINE.sub(_BLANK, m.group(2)) + m.group(3), markup)
    try:
        markdown = (
            trafilatura.extract(
                markup,
                url=url,
                output_format="markdown",
                favor_precision=True,
                include_comments=False,
                include_tables=True,
                include_formatting=True,
                with_metadata=False,
                deduplicate=False,
            )
            or None
        )
        return _BLANK_LINE.sub("", markdown).replace(_BLANK, "") if markdown else None
    except Exception as e:  # trafilatura raises assorted parser errors on broken markup
        log.warning("trafilatura failed on %s: %s", url or "page", e)
        return None


def _page_metadata(markup: str, url: str | None) -> dict[str, Any]:
    """Title, author, stated date, description, tags… (empty values dropped)."""
    from trafilatura import extract_metadata

    try:
        found = extract_metadata(
            markup, default_url=url, date_config={"extensive_search": False, "original_date": True}
        ).as_dict()
    except Exception as e:
        log.warning("no metadata from %s: %s", url or "page", e)
        return {}
    meta = {k: found.get(k) for k in ("title", *_META_KEYS)}
    meta["tags"] = _split_tags(found.get("tags"))
    meta["categories"] = _split_tags(found.get("categories"))
    return {k: v for k, v in meta.items() if v}


def _split_tags(values: Any) -> list[str]:
    """trafilatura gives ``["a, b"]`` for ``<meta name="keywords" content="a, b">``."""
    if isinstance(values, str):
        values = [values]
    return [t.strip() for v in values or () for t in str(v).split(",") if t.strip()]


def _clean_block(block: Block) -> Block:
    """Undo trafilatura's Markdown escaping and bold markers (code blocks are left alone)."""
    if block.text.lstrip().startswith(("```", "~~~")):
        return block
    rows = _is_table_rows(block.text)
    text = _BOLD.sub(r"\1", (_MD_ESCAPE_IN_TABLE if rows else _MD_ESCAPE).sub(r"\1", block.text))
    path = tuple(_MD_ESCAPE.sub(r"\1", h) for h in block.heading_path)
    if rows and not table_header(text):  # trafilatura writes a table without header cells without the rule
        lines = [ln.rstrip() for ln in text.split("\n")]
        columns = len(_CELL_BAR.findall(lines[0])) - 1
        text = "\n".join([lines[0], "|" + " --- |" * columns, *lines[1:]])
    if table_header(text):  # a table: its caption joins the heading path, its header row names the columns
        caption, text = tidy_table(text)
        path = (*path, caption) if caption else path
    return Block(text, heading_path=path, page=block.page)


def _is_table_rows(text: str) -> bool:
    """Whether a block is a Markdown table's rows (every line between bars)."""
    lines = text.strip().split("\n")
    return len(lines) >= 2 and all(ln.startswith("|") and ln.rstrip().endswith("|") for ln in lines)


def _body_paragraphs(markup: str) -> tuple[list[str], str | None]:
    """The fallback: paragraphs of ``<body>`` without the chrome, and the first ``<h1>``/``<title>``."""
    root = _parse(markup)
    if root is None:
        return [], None
    title = _first_text(root, "//title") or _first_text(root, "//h1")
    body = root.find(".//body")
    return _paragraphs(body if body is not None else root, drop=_NOISE_TAGS + _CHROME_TAGS), title


def html_paragraphs(markup: str) -> list[str]:
    """Every paragraph of text in an HTML fragment or page (scripts and styles dropped)."""
    root = _parse(markup)
    return [] if root is None else _paragraphs(root, drop=_NOISE_TAGS)


_XML_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")


def _parse(markup: str):
    """An lxml tree, or ``None`` for markup with no elements at all."""
    from lxml import etree
    from lxml import html as lxml_html

    markup = re.sub(r"^\s*<\?xml[^>]*\?>", "", markup)  # lxml refuses str with an encoding declaration
    if _XML_CONTROLS.search(markup):  # lxml parses C0 controls but refuses them when text is set back
        markup = _XML_CONTROLS.sub("", markup)
    try:
        # huge_tree: no depth limit (a 10k-deep nest) and no 10 MB limit on one text node
        parser = lxml_html.HTMLParser(huge_tree=True)
        return lxml_html.document_fromstring(markup, parser=parser) if markup.strip() else None
    except (etree.ParserError, ValueError) as e:  # "Document is empty" and the like
        log.debug("no HTML tree: %s", e)
        return None


def _first_text(root, xpath: str) -> str | None:
    """The whitespace-collapsed text of the first element ``xpath`` finds."""
    found = root.xpath(xpath)
    text = " ".join(found[0].text_content().split()) if found else ""
    return text or None


def _paragraphs(root, drop: tuple[str, ...]) -> list[str]:
    """Text of ``root`` split into paragraphs at block elements and ``<br>`` (whitespace collapsed)."""
    for el in list(root.iter(*drop)):
        el.drop_tree()
    in_pres = {d for p in root.iter("pre") for d in p.iter()}  # not iterancestors: O(depth) per element
    for el in root.iter():
        in_pre = el in in_pres
        if isinstance(el.tag, str) and not in_pre:
            el.text = _squash(el.text)
        if not in_pre:
            el.tail = _squash(el.tail)
    for el in root.iter(*_BLOCK_TAGS):
        el.text = "\n\n" + (el.text or "")
        el.tail = "\n\n" + (el.tail or "")
    for el in root.iter("br"):
        el.tail = "\n" + (el.tail or "")
    for el in root.iter("td", "th"):  # a row is one line, its cells words apart
        el.tail = " " + (el.tail or "")
    text = _text_of(root)
    return [p for p in (_tidy(p) for p in re.split(r"\n\s*\n", text)) if p]


def _text_of(root) -> str:
    """``root.text_content()`` without recursion: libxml2's XPath gives nothing for a 10k-deep nest."""
    parts = [root.text or ""]
    stack = [(root, iter(root))]
    while stack:
        el, children = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            if el is not root and el.tail:
                parts.append(el.tail)
        else:
            if isinstance(child.tag, str) and child.text:  # a comment's text is not text
                parts.append(child.text)
            stack.append((child, iter(child)))
    return "".join(parts)


def _stripped_paragraphs(markup: str) -> list[str]:
    """The last resort: scripts, styles and tags removed, entities decoded, split at block tags."""
    import html

    text = _NOISE_ELEMENTS.sub(" ", markup)
    text = _BLOCK_TAG.sub("\n\n", text)
    text = html.unescape(_ANY_TAG.sub(" ", text))
    return [p for p in (" ".join(p.split()) for p in re.split(r"\n\s*\n", text)) if p]


def _squash(text: str | None) -> str | None:
    """Collapse runs of whitespace (HTML source line breaks are not text)."""
    return re.sub(r"\s+", " ", text) if text else text


def _tidy(paragraph: str) -> str:
    """Strip every line of a paragraph and drop the empty ones."""
    return "\n".join(line.strip() for line in paragraph.strip("\n").split("\n") if line.strip())
