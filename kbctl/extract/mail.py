"""E-mail: single messages (``.eml``) and mailboxes (``.mbox``), ``source_type="email"``.

Each message keeps its body — the ``text/plain`` part when there is one, else the HTML part as
text — split into paragraphs; its title is the subject. Metadata: ``subject``, ``from``, ``to``,
``cc``, ``date`` (ISO 8601, UTC), ``message_id``, ``in_reply_to``, ``thread_id`` (the first
Message-ID of ``References``, else ``In-Reply-To``, else its own; all ids without ``<>``),
``author`` (= ``from``), ``has_attachments``, ``attachments`` (file names) and
``attachment_errors`` (``"name: reason"`` for attachments that could not be read).

Every attachment that an extractor reads (text, Markdown, HTML, PDF, a forwarded message…)
becomes child documents: uri ``<message uri>#attachment/<file name>``, ``parent_uri`` the
message's uri, metadata ``attachment_filename``, ``parent_subject`` and ``thread_id``. A failing
attachment never fails its message. A message with an empty body but readable attachments keeps
its subject as its text.

An mbox gives the documents of each of its messages, the uri of each being
``<mbox uri>#<Message-ID>``, or ``#message-<hash>`` when it has none: the first 16 hex digits of
the SHA-256 of its Date, From and Subject and its body's bytes, so a message keeps its key when
others are added before it (its position did not) or a mail client rewrites its ``Status:``. A
message's metadata holds its own ``size``, never the mbox file's ``size``, ``mtime`` or digest
(they change with every message added). A message that cannot be read is skipped. The run
records, as warnings, attachments that could not be read, a Message-ID repeated in one mbox, or
an exact copy of a message without one (the later message is stored at ``<uri>~2``), and the
messages skipped.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import replace
from email import policy
from email.message import EmailMessage, Message, MIMEPart
from email.parser import BytesParser
from typing import Any, Callable, Iterator

from ..errors import ExtractError
from ..textutil.dates import iso_datetime
from ..types import Block, Document, Source
from .base import build_document, split_paragraphs
from .detect import SUPPORTED_SUFFIXES, guess_media_type
from .html import html_paragraphs

__all__ = ["extract_eml", "extract_mbox", "message_documents", "split_mbox", "message_metadata"]

log = logging.getLogger(__name__)

_MSG_ID = re.compile(r"<([^<>\s]+)>")
_FROM_LINE = re.compile(rb"^From [^\n]*\n", re.M)
_POSTMARK = re.compile(
    rb"From \S+ +(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
)
_ESCAPED_FROM = re.compile(rb"^>(>*From )", re.M)
#: A message's header block larger than this is refused (the header parser is superlinear on one long header).
MAX_HEADER_BYTES = 128 << 10
#: A header value longer than this is kept raw and cut, not parsed (a 1 MB ``To:`` took 90 s to parse).
MAX_HEADER_CHARS = 16 << 10
_BLANK_LINE = re.compile(rb"\r?\n\r?\n")
_EXTRACTABLE_TYPES = frozenset({"text/plain", "text/markdown", "text/html", "application/pdf", "message/rfc822"})


#: Reads an attachment of any format: ``kbctl.extract.extract``, passed in by the package that
#: dispatches to this module (so this module does not import it back).
ExtractPart = Callable[[Source], list[Document]]

#: Notes a message's document carries (the run records each as a warning): attachments that could
#: not be read, a Message-ID an earlier message of the mbox took, messages of the mbox skipped.
ATTACHMENT_FAILED = "AttachmentWarning"
DUPLICATE_ID = "DuplicateIdWarning"
SKIPPED_MESSAGE = "SkippedMessageWarning"


def extract_eml(source: Source, *, extract_part: ExtractPart) -> list[Document]:
    """One message (and its readable attachments, read with ``extract_part``)."""
    return message_documents(parse_message(source.content), source, source.uri, extract_part)


def extract_mbox(source: Source, *, extract_part: ExtractPart) -> list[Document]:
    """Every message of an mbox (and their attachments, read with ``extract_part``), in mailbox order."""
    docs: list[Document] = []
    seen: set[str] = set()
    skipped: list[str] = []
    raw_messages = split_mbox(source.content)
    for n, raw in enumerate(raw_messages, 1):
        try:
            msg = parse_message(raw)
            message_id = _first_id(_header(msg, "Message-ID"))
            base = f"{source.uri}#{message_id or _message_key(msg, raw)}"
            uri = _unique(base, seen)
            made = message_documents(msg, _message_source(source, raw), uri, extract_part)
            if uri != base:
                what = (
                    "repeats the Message-ID of an earlier message"
                    if message_id
                    else "is a copy of an earlier message without a Message-ID (date, sender, subject and body)"
                )
                note = (DUPLICATE_ID, f"message {n} {what}; stored as {uri}")
                made[0] = replace(made[0], notes=(*made[0].notes, note))
            docs.extend(made)
        except ExtractError as e:
            log.info("skipping message %d of %s: %s", n, source.uri, e)
            skipped.append(f"message {n}: {e.message}")
    if docs and skipped:  # the run says so once, on the first message stored
        note = (SKIPPED_MESSAGE, f"{len(skipped)} message(s) of the mbox could not be read: {'; '.join(skipped)}")
        docs[0] = replace(docs[0], notes=(*docs[0].notes, note))
    if not docs:
        what = "no messages" if not raw_messages else "no message with text"
        raise ExtractError(
            f"empty mbox ({what})", hint="check that the file is an mbox (messages start with 'From ' lines)"
        )
    return docs


#: What a source's metadata says of the whole mbox file (it changes with any message added), not of one message.
_MBOX_ONLY = ("size", "mtime", "sha256", "fetched_at", "charset")


def _message_source(mbox: Source, raw: bytes) -> Source:
    """The mbox as the source of one of its messages: its metadata without what describes the whole
    file (a message added anywhere changed every message's content hash), with the message's size."""
    metadata = {k: v for k, v in mbox.metadata.items() if k not in _MBOX_ONLY}
    return replace(mbox, metadata={**metadata, "size": len(raw)})


def _message_key(msg: Message, raw: bytes) -> str:
    """The key of a message without a Message-ID: a hash of its Date, From, Subject and body bytes
    (not of its position in the mbox, nor of headers a mail client rewrites, such as ``Status:``)."""
    h = hashlib.sha256()
    for name in ("Date", "From", "Subject"):
        h.update((_header(msg, name) or "").encode("utf-8", "replace") + b"\0")
    blank = _BLANK_LINE.search(raw)
    h.update(raw[blank.end() :] if blank else b"")
    return f"message-{h.hexdigest()[:16]}"


def split_mbox(data: bytes) -> list[bytes]:
    """The raw messages of an mbox: split at ``From `` lines, which are dropped; ``>From`` unescaped."""
    data = data.replace(b"\r\n", b"\n").lstrip(b"\n")
    starts = [m.start() for m in _FROM_LINE.finditer(data) if _separates(data, m.start())]
    bounds = zip(starts, starts[1:] + [len(data)])
    messages = [_FROM_LINE.sub(b"", data[a:b], count=1) for a, b in bounds]
    return [_ESCAPED_FROM.sub(rb"\1", m).strip(b"\n") + b"\n" for m in messages if m.strip()]


def _separates(data: bytes, at: int) -> bool:
    """A ``From `` line starts a message at the top, after a blank line, or when it is a postmark
    (``From sender Mon Oct 21 08:02:00 2024``); a body line "From here on…" is none of these."""
    return at == 0 or data[at - 2 : at] == b"\n\n" or bool(_POSTMARK.match(data, at))


def parse_message(data: bytes) -> EmailMessage:
    """Bytes → ``EmailMessage`` (``email.policy.default``; the parser itself never raises).

    ``ExtractError`` for a header block over ``MAX_HEADER_BYTES``."""
    blank = _BLANK_LINE.search(data, 0, MAX_HEADER_BYTES + 4)
    if blank is None and len(data) > MAX_HEADER_BYTES:
        raise ExtractError(
            f"mail headers larger than {MAX_HEADER_BYTES >> 10} KB",
            hint="the message's header block is not one a mailer writes",
        )
    return BytesParser(policy=policy.default).parsebytes(data)


def message_documents(msg: EmailMessage, source: Source, uri: str, extract_part: ExtractPart) -> list[Document]:
    """The message's document followed by its attachments' documents."""
    meta = message_metadata(msg)
    children, errors = _attachment_documents(msg, source, uri, meta, extract_part)
    if errors:
        meta["attachment_errors"] = errors
    blocks = [Block(p) for p in _body_paragraphs(msg)]
    if not blocks and children:
        blocks = [Block(meta.get("subject") or "(no subject)")]
    notes = ((ATTACHMENT_FAILED, f"attachments that could not be read: {'; '.join(errors)}"),) if errors else ()
    doc = build_document(
        source, title=meta.get("subject", ""), blocks=blocks, source_type="email", metadata=meta, uri=uri, notes=notes
    )
    return [doc, *children]


def message_metadata(msg: Message) -> dict[str, Any]:
    """Headers as metadata (ids without ``<>``, the date in ISO 8601)."""
    message_id = _first_id(_header(msg, "Message-ID"))
    in_reply_to = _first_id(_header(msg, "In-Reply-To"))
    references = _ids(_header(msg, "References"))
    attachments = [_filename(p, n) for n, p in enumerate(_attachments(msg), 1)]
    meta: dict[str, Any] = {
        "subject": _header(msg, "Subject"),
        "from": _header(msg, "From"),
        "to": _header(msg, "To"),
        "cc": _header(msg, "Cc"),
        "date": _date(msg),
        "message_id": message_id,
        "in_reply_to": in_reply_to,
        "thread_id": (references[0] if references else None) or in_reply_to or message_id,
        "has_attachments": bool(attachments),
        "attachments": attachments,
    }
    meta["author"] = meta["from"]
    return {k: v for k, v in meta.items() if v is not None and v != ""}


def _header(msg: Message, name: str) -> str | None:
    """A header as one line of text (malformed headers, and those over ``MAX_HEADER_CHARS``, as their raw value, cut)."""
    raw = next((v for k, v in msg.raw_items() if k.lower() == name.lower()), None)
    if raw is not None and len(raw) > MAX_HEADER_CHARS:
        return " ".join(str(raw)[:MAX_HEADER_CHARS].split()) + " …"
    try:
        value = msg.get(name)
    except Exception:  # a header the policy cannot parse: take its raw value
        value = next((v for k, v in msg.raw_items() if k.lower() == name.lower()), None)
    return " ".join(str(value).split()) if value is not None else None


def _ids(value: str | None) -> list[str]:
    """Every ``<id>`` in a header, without the brackets."""
    return _MSG_ID.findall(value or "")


def _first_id(value: str | None) -> str | None:
    """The first ``<id>`` of a header, else the bare value."""
    if not value:
        return None
    found = _ids(value)
    return found[0] if found else value.strip().strip("<>") or None


def _date(msg: Message) -> str | None:
    """The ``Date`` header in ISO 8601 (UTC), ``None`` when missing or unparseable."""
    try:
        header = msg.get("Date")
        dt = getattr(header, "datetime", None)
    except Exception:
        return None
    return iso_datetime(dt) if dt else None


def _body_paragraphs(msg: EmailMessage) -> list[str]:
    """The plain-text body (or the HTML one as text) as paragraphs."""
    part = msg.get_body(preferencelist=("plain", "html"))
    if part is None:
        return []
    text = _part_text(part)
    return (
        html_paragraphs(text) if part.get_content_subtype() == "html" else split_paragraphs(text.replace("\r\n", "\n"))
    )


def _part_text(part: MIMEPart) -> str:
    """A text part decoded with its charset (undeclared or unknown charsets: UTF-8, replacing)."""
    try:
        return part.get_content()
    except (LookupError, UnicodeError, KeyError, AssertionError):
        payload = part.get_payload(decode=True)
        return payload.decode("utf-8", errors="replace") if isinstance(payload, bytes) else ""


def _attachments(msg: Message) -> Iterator[EmailMessage]:
    """The message's attachments (parts that are not its body)."""
    if isinstance(msg, EmailMessage) and msg.is_multipart():
        try:
            yield from msg.iter_attachments()
        except (KeyError, TypeError):  # a multipart/related without a usable start part
            return


def _filename(part: Message, n: int) -> str:
    """The attachment's file name (``attachment-<n>`` when it has none; path parts removed)."""
    name = part.get_filename() or ""
    name = re.split(r"[\\/]", name)[-1].strip()
    if name:
        return name
    ext = ".eml" if part.get_content_type() == "message/rfc822" else ""
    return f"attachment-{n}{ext}"


def _attachment_documents(
    msg: EmailMessage, source: Source, uri: str, meta: dict, extract_part: ExtractPart
) -> tuple[list[Document], list[str]]:
    """Documents of the readable attachments, and ``"name: reason"`` for those that failed."""
    docs: list[Document] = []
    errors: list[str] = []
    seen: set[str] = set()
    for n, part in enumerate(_attachments(msg), 1):
        name = _filename(part, n)
        if not _extractable(part, name):
            continue
        try:
            child = _child_source(part, name, _unique(f"{uri}#attachment/{name}", seen), source)
            docs.extend(_as_child(d, uri, name, meta) for d in extract_part(child))
        except ExtractError as e:
            errors.append(f"{name}: {e.message}")
        except Exception as e:  # one odd attachment must not lose the message
            log.warning("attachment %s of %s failed: %r", name, uri, e)
            errors.append(f"{name}: {type(e).__name__}: {e}")
    return docs, errors


def _extractable(part: Message, name: str) -> bool:
    """Whether an extractor may read the attachment (by file suffix or content type)."""
    suffix = name[name.rfind(".") :].lower() if "." in name else ""
    return suffix in SUPPORTED_SUFFIXES or part.get_content_type() in _EXTRACTABLE_TYPES


def _child_source(part: EmailMessage, name: str, uri: str, parent: Source) -> Source:
    """The attachment as a Source; text parts re-encoded as UTF-8 from their declared charset."""
    if part.get_content_type() == "message/rfc822":
        inner = part.get_payload()
        message = inner[0] if isinstance(inner, list) else inner
        content = message.as_bytes() if isinstance(message, Message) else str(message).encode("utf-8")
    elif part.get_content_maintype() == "text":
        content = _part_text(part).encode("utf-8")
    else:
        payload = part.get_payload(decode=True)
        content = payload if isinstance(payload, bytes) else b""
    metadata = {k: v for k, v in parent.metadata.items() if k not in ("size", "sha256", "charset")}
    metadata["size"] = len(content)
    media_type = guess_media_type(name) or part.get_content_type()
    return Source(uri=uri, content=content, media_type=media_type, kind=parent.kind, metadata=metadata)


def _as_child(doc: Document, message_uri: str, name: str, meta: dict) -> Document:
    """The attachment's document linked to its message (nested children keep their own parent)."""
    extra = {"attachment_filename": name, "parent_subject": meta.get("subject"), "thread_id": meta.get("thread_id")}
    return Document.from_blocks(
        uri=doc.uri,
        title=doc.title,
        blocks=doc.blocks,
        source_type=doc.source_type,
        metadata={**doc.metadata, **{k: v for k, v in extra.items() if v}},
        parent_uri=doc.parent_uri or message_uri,
        fetch_facts=doc.fetch_facts,
    )


def _unique(uri: str, seen: set[str]) -> str:
    """``uri``, or ``uri~2``, ``uri~3``… when an earlier item already took it."""
    candidate, n = uri, 1
    while candidate in seen:
        n += 1
        candidate = f"{uri}~{n}"
    seen.add(candidate)
    return candidate
