"""Classic test collections in SMART format (CACM, CISI, ADI, MED, Cranfield, Time, NPL…) to BEIR.

The collections of the SMART system and the Glasgow IR group's copies come as three text files:

* documents (``cacm.all``, ``CISI.ALL``, ``MED.ALL``): records that start with ``.I <id>``, fields
  that start with a marker line (``.T`` title, ``.W`` text, ``.A`` authors, ``.B`` source, …);
* queries (``query.text``, ``CISI.QRY``): the same layout, the question in ``.W``;
* judgements (``qrels.text``, ``CISI.REL``, ``MED.REL``), one pair a line, in one of two layouts:
  ``query doc …`` (CACM, CISI, ADI: whatever follows the pair is ignored) or TREC's
  ``query 0 doc grade`` (MED). ``auto`` tells them apart by the second column: a 0 on every line is
  TREC's iteration column.

``convert_smart`` writes the BEIR folder ``kbctl eval import`` and ``kbctl eval run`` read:
``corpus.jsonl`` (``title`` from ``.T``, ``text`` from the text fields joined, the other fields asked
for in ``metadata``), ``queries.jsonl`` and ``qrels/test.tsv``. Numeric ids are written without
leading zeros on both sides (CACM's judgements say ``01`` for query ``1``). A record without any text
is left out and counted; every judgement is written as given, and those naming a query or a document
that is not there are counted (a missing document counts as missed, as trec_eval counts it). The
report says what was left out or cannot be found: nothing is silently dropped.

Collections with their own quirks need their options: Cranfield's judgements number the queries
1…225 in file order, not by their ``.I`` ids (``number_queries_by_position``), and grade with
Cleverdon's codes in the column after the document, where a lower code is more relevant: 1 (a
complete answer) … 4 (minimum interest), 5 or -1 (no interest). ``grades="cleverdon"`` writes
BEIR's grade ``5 - code`` (4 … 1) and 0 for 5 and -1 (judged not relevant); the default,
``"given"``, grades every pair 1 and takes TREC's fourth column as it is.
"""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Literal, Sequence

from kbctl.errors import ConfigError, UsageError

__all__ = ["SmartReport", "convert_smart", "read_smart", "read_smart_qrels"]

QrelsLayout = Literal["auto", "pairs", "trec"]
Grades = Literal["given", "cleverdon"]
CLEVERDON = {"1": 4, "2": 3, "3": 2, "4": 1, "5": 0, "-1": 0}  # Cleverdon's code -> BEIR grade (5 - code; -1: 0)

# Metadata keys for the SMART field letters the classic collections use; another letter keeps its letter.
FIELD_NAMES = {"A": "author", "B": "source", "C": "categories", "K": "keywords", "N": "entry", "X": "references"}
_RECORD = re.compile(r"^\.I\s+(\S+)\s*$")
_FIELD = re.compile(r"^\.([A-Z])\s*(.*)$")


@dataclass(frozen=True)
class SmartReport:
    """What a conversion wrote and what it left out (each with its reason)."""

    out: str
    documents: int
    queries: int
    judged_queries: int
    judgements: int
    qrels_layout: str
    left_out: dict[str, int] = field(default_factory=dict)
    """Counts by reason: records left out, and judgements written that name what is not there."""

    def to_json(self) -> dict:
        return {
            "out": self.out,
            "documents": self.documents,
            "queries": self.queries,
            "judged_queries": self.judged_queries,
            "judgements": self.judgements,
            "qrels_layout": self.qrels_layout,
            "left_out": dict(self.left_out),
        }


def _id(value: str) -> str:
    """An id as written, without leading zeros when it is a number."""
    return str(int(value)) if value.isdigit() else value


def _text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of a file read a line at a time (a collection's documents file can be
    large), decoded as the whole file decodes: UTF-8, else Latin-1 (``_encoding``); the lines are
    those of ``str.splitlines`` (CRLF, CR, a form feed… end one)."""
    try:
        encoding = _encoding(path)
        fh = path.open(encoding=encoding, newline=None)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}", hint="check the path") from exc
    lineno = 0
    with fh:
        for n, chunk in enumerate(fh):  # universal newlines: split at \n, \r\n and \r
            for line in (chunk.lstrip("\ufeff") if n == 0 else chunk).splitlines():
                lineno += 1
                yield lineno, line.rstrip()


def _encoding(path: Path) -> str:
    """UTF-8 when every byte of the file decodes as UTF-8, else Latin-1 (the collections of the
    1960s to 80s predate UTF-8; Latin-1 reads every byte). Read in blocks, never whole."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    with path.open("rb") as fh:
        try:
            for block in iter(lambda: fh.read(1 << 16), b""):
                decoder.decode(block)
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            return "latin-1"
    return "utf-8"


def read_smart(path: Path) -> list[tuple[str, dict[str, str]]]:
    """The records of a SMART file in order: ``(id, {field letter: text})``; a field's lines are
    joined, each run of whitespace made one space. Text before the first ``.I`` line is a ``ConfigError``."""
    path = Path(path)
    records: list[tuple[str, dict[str, list[str]]]] = []
    current: str | None = None
    for lineno, line in _text_lines(path):
        if m := _RECORD.match(line):
            records.append((_id(m.group(1)), {}))
            current = None
            continue
        if not records:
            if line.strip():
                raise ConfigError(
                    f"{path}:{lineno}: expected a record's '.I <id>' line first",
                    hint="is this a SMART-format file (records start with .I, fields with .T, .W, …)?",
                )
            continue
        if (m := _FIELD.match(line)) and len(line.split()[0]) == 2:
            current = m.group(1)
            records[-1][1].setdefault(current, [])
            if m.group(2).strip():
                records[-1][1][current].append(m.group(2).strip())
            continue
        if current is not None and line.strip():
            records[-1][1][current].append(line.strip())
    return [(rid, {k: " ".join(" ".join(v).split()) for k, v in fields.items()}) for rid, fields in records]


def _qrels_layout(rows: Sequence[list[str]], layout: QrelsLayout) -> str:
    if layout != "auto":
        return layout
    if rows and all(len(r) >= 4 and r[1] == "0" for r in rows):
        return "trec"
    return "pairs"


def _cleverdon(parts: list[str], at: int, path: Path, lineno: int) -> int:
    """BEIR's grade for the Cleverdon code in column ``at`` (module docstring)."""
    if len(parts) <= at:
        raise ConfigError(
            f"{path}:{lineno}: no code after the document",
            hint="--grades cleverdon reads 'query document code' (TREC layout: 'query 0 document code')",
        )
    code = parts[at].lstrip("+")
    if code not in CLEVERDON:
        raise ConfigError(
            f"{path}:{lineno}: Cleverdon code {parts[at]!r} is not 1, 2, 3, 4, 5 or -1",
            hint="Cleverdon's codes: 1 (a complete answer) … 4 (minimum interest), 5 or -1 (no interest);"
            " for other grades leave out --grades cleverdon",
        )
    return CLEVERDON[code]


def read_smart_qrels(
    path: Path, layout: QrelsLayout = "auto", grades: Grades = "given"
) -> tuple[str, dict[str, dict[str, int]]]:
    """``(layout used, {query: {document: grade}})``: ``pairs`` judge every listed pair relevant
    (grade 1); ``trec`` takes the fourth column as the grade (0 and below: judged not relevant).
    With ``grades="cleverdon"`` the column after the document is a Cleverdon code, graded ``5 - code``
    (5 and -1: 0)."""
    path = Path(path)
    rows: list[list[str]] = []
    numbers: list[int] = []
    for lineno, line in _text_lines(path):
        parts = line.split()
        if not parts:
            continue
        if len(parts) < 2:
            raise ConfigError(f"{path}:{lineno}: expected 'query document …'", hint="one judgement a line")
        rows.append(parts)
        numbers.append(lineno)
    used = _qrels_layout(rows, layout)
    qrels: dict[str, dict[str, int]] = {}
    for parts, lineno in zip(rows, numbers):
        if used == "trec":
            if len(parts) < 4:
                raise ConfigError(
                    f"{path}:{lineno}: expected 'query 0 document grade' (TREC layout)",
                    hint="pass --qrels-layout pairs for 'query document' lines",
                )
            q, d, grade_text = parts[0], parts[2], parts[3]
            try:
                grade = int(float(grade_text))
            except ValueError:
                raise ConfigError(f"{path}:{lineno}: grade {grade_text!r} is not a number") from None
            if grades == "cleverdon":
                grade = _cleverdon(parts, 3, path, lineno)
        else:
            q, d = parts[0], parts[1]
            grade = _cleverdon(parts, 2, path, lineno) if grades == "cleverdon" else 1
        qrels.setdefault(_id(q), {})[_id(d)] = max(grade, qrels.get(_id(q), {}).get(_id(d), grade))
    return used, qrels


def convert_smart(
    documents: Path,
    queries: Path,
    qrels: Path,
    out: Path,
    *,
    text_fields: Sequence[str] = ("W",),
    metadata_fields: Sequence[str] = (),
    qrels_layout: QrelsLayout = "auto",
    number_queries_by_position: bool = False,
    grades: Grades = "given",
) -> SmartReport:
    """Write the BEIR folder ``out`` from a SMART collection's three files (module docstring)."""
    bad = [f for f in (*text_fields, *metadata_fields) if not re.fullmatch(r"[A-Za-z]", f)]
    if bad:
        raise UsageError(f"field {bad[0]!r} is not a SMART field letter", hint="e.g. W (text), A (authors), B (source)")
    if qrels_layout not in ("auto", "pairs", "trec"):
        raise UsageError(f"unknown qrels layout {qrels_layout!r}", hint="auto, pairs or trec")
    if grades not in ("given", "cleverdon"):
        raise UsageError(f"unknown grades {grades!r}", hint="given (the default) or cleverdon (Cranfield's codes)")
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"{out} exists and is not an empty folder", hint="name a new folder for the BEIR files")
    if not out.parent.is_dir():  # as kbctl eval's other outputs: a typo in the path makes no folders
        raise UsageError(
            f"{out}: there is no folder {out.parent}",
            hint="create the folder first, or name a new folder in one that exists",
        )
    docs = read_smart(Path(documents))
    qs = read_smart(Path(queries))
    used, judged = read_smart_qrels(Path(qrels), qrels_layout, grades)
    left: dict[str, int] = {}

    def skip(reason: str) -> None:
        left[reason] = left.get(reason, 0) + 1

    corpus: list[dict] = []
    seen: set[str] = set()
    for rid, rec in docs:
        if rid in seen:
            skip("documents with an id seen before")
            continue
        seen.add(rid)
        title = rec.get("T", "")
        text = " ".join(rec[f] for f in (x.upper() for x in text_fields) if rec.get(f))
        if not (title or text):
            skip("documents without text")
            continue
        meta = {FIELD_NAMES.get(f, f): rec[f] for f in (x.upper() for x in metadata_fields) if rec.get(f)}
        corpus.append({"_id": rid, "title": title, "text": text, "metadata": meta})
    doc_ids = {d["_id"] for d in corpus}
    query_rows: list[dict] = []
    for position, (rid, rec) in enumerate(qs, start=1):
        qid = str(position) if number_queries_by_position else rid
        if not rec.get("W"):
            skip("queries without text")
            continue
        query_rows.append({"_id": qid, "text": rec["W"], "metadata": {}})
    query_ids = {q["_id"] for q in query_rows}
    # Every judgement is written as given: one of a document the corpus lacks counts as missed (as
    # trec_eval and `kbctl eval import` count it), one of a query the queries file lacks is not
    # evaluated (`kbctl eval run` says so); both are counted here.
    pairs: list[tuple[str, str, int]] = []
    usable = 0
    for q, rel in judged.items():
        for d, grade in rel.items():
            pairs.append((q, d, grade))
            if q not in query_ids:
                skip("judgements of a query not in the queries file (written; not evaluated)")
            elif d not in doc_ids:
                skip("judgements of a document not in the corpus (written; counted as missed)")
            else:
                usable += 1
    if not corpus:
        raise ConfigError(f"{documents}: no document with text", hint="is this the collection's documents file?")
    if not usable:
        raise ConfigError(
            f"{qrels}: no judgement names a query and a document of the collection",
            hint="check the files belong together, or try --qrels-layout / --number-queries-by-position",
        )
    (out / "qrels").mkdir(parents=True, exist_ok=True)  # out itself, and qrels/ in it
    with (out / "corpus.jsonl").open("w", encoding="utf-8") as fh:
        for record in corpus:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    with (out / "queries.jsonl").open("w", encoding="utf-8") as fh:
        for row in query_rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    with (out / "qrels" / "test.tsv").open("w", encoding="utf-8") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for q, d, grade in pairs:
            fh.write(f"{q}\t{d}\t{grade}\n")
    return SmartReport(
        str(out),
        len(corpus),
        len(query_rows),
        len({q for q, _, g in pairs if g > 0 and q in query_ids}),
        len(pairs),
        used,
        left,
    )
