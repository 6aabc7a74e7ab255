"""Records: a JSON object ``{"title", "text", "metadata"}`` that is already a document.

Used for BEIR corpora (``kbctl eval import``) and JSONL exports, so they travel through the normal
pipeline (incremental, cached, ledgered). The source URI is the record's id.
"""

from __future__ import annotations

import json

from ..errors import ExtractError
from ..types import Block, Document, Source

RECORD_MEDIA_TYPE = "application/x-kbctl-record+json"


def extract_record(source: Source) -> list[Document]:
    try:
        body = json.loads(source.content)
    except (ValueError, UnicodeDecodeError) as e:
        raise ExtractError(f"record {source.uri}: not JSON ({e})") from None
    text, title = str(body.get("text") or ""), str(body.get("title") or "")
    if not text.strip() and not title.strip():
        raise ExtractError(f"record {source.uri} has no text", hint="records need a title or a text")
    meta = dict(body.get("metadata") or {})
    meta.setdefault("source_type", "record")
    paras = [p for p in text.split("\n\n") if p.strip()] or [title]
    return [Document.from_blocks(source.uri, title, [Block(p) for p in paras], "record", meta)]
