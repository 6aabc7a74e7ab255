"""Evaluation datasets: BEIR-layout test collections and a team's JSONL golden set.

Two layouts are read, both validated here, at the boundary (a bad line is a ``ConfigError`` whose
message starts with ``file:line``):

* **BEIR** (a folder): ``corpus.jsonl`` (``_id``, ``title``, ``text``, ``metadata``),
  ``queries.jsonl`` (``_id``, ``text``), either also read gzipped (``.jsonl.gz``), and
  ``qrels/<split>.tsv`` (``query-id``, ``corpus-id``, ``score``, tab-separated; the header line is
  optional, and when present names the columns, so others may stand beside them), also read
  gzipped (``<split>.tsv.gz``). A plain file is read before its gzipped copy. Ids may be JSON
  strings or integers; a byte order mark and CRLF line ends are read as any other file. As in BEIR,
  only the queries that appear in the qrels file are evaluated, and only those are checked: a query
  the split does not judge is skipped even without a text (``EvalDataset.notes`` counts it). A
  judged query missing from ``queries.jsonl`` is not evaluated (a note, as pytrec_eval leaves out
  a query its run lacks). A judged query given twice with another text, or holding a NUL, is an
  error naming its line. The corpus is not loaded; ``iter_beir_corpus`` streams it.
* **golden** (one ``.jsonl`` file), one query per line::

      {"id": "q01", "query": "how long do refunds take", "namespace": "billing_kb",
       "relevant": {"support/billing/refunds.md": 2, "support/billing/plan-changes.md": 1}}

  ``relevant`` may also be a list of ids (each grade 1). ``namespace`` is optional; ``notes`` is
  allowed and ignored. ``passages`` (optional) judges sections: ``{"DOC#HEADING": grade}``, where
  DOC is a document id as in ``relevant`` and HEADING the section's heading (its last heading, or
  the whole heading path joined by `` › ``), split at the last ``#``::

      "passages": {"support/technical/api-error-codes.md#LMN-4012 — E_SCOPE_DENIED": 2}

  A passage's document counts as relevant with the passage's grade unless ``relevant`` grades it.

Grades are integers; above 0 is relevant, 0 or below is judged not relevant.
"""

from __future__ import annotations

import difflib
import gzip
import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterator, Literal, Mapping

from kbctl.errors import ConfigError, UsageError

__all__ = [
    "EvalQuery",
    "EvalDataset",
    "load_beir",
    "load_golden",
    "load_dataset",
    "iter_beir_corpus",
    "beir_file",
    "beir_relevant_documents",
    "check_beir_corpus",
    "qrels_file",
]

GOLDEN_KEYS = ("id", "query", "namespace", "relevant", "passages", "notes")
PASSAGE_SEP = "#"
QRELS_COLUMNS = ("query-id", "corpus-id", "score")
BEIR_LAYOUT = (
    "a BEIR folder holds corpus.jsonl, queries.jsonl and qrels/<split>.tsv (any may be gzipped: .jsonl.gz, .tsv.gz)"
)
SHOWN = 5  # ids or line numbers a note lists


@dataclass(frozen=True)
class EvalQuery:
    """One evaluation query; ``namespace`` is where a golden query should be searched."""

    id: str
    text: str
    namespace: str | None = None


@dataclass(frozen=True)
class EvalDataset:
    """Queries with their judgements (``qid -> {docid: grade}``, read-only)."""

    name: str
    queries: tuple[EvalQuery, ...]
    qrels: Mapping[str, Mapping[str, int]]
    corpus_path: Path | None
    kind: Literal["beir", "golden"]
    passage_qrels: Mapping[str, Mapping[str, int]] = field(default_factory=lambda: MappingProxyType({}))
    notes: tuple[str, ...] = ()  # what was read but left out (unjudged queries without a text, …), one line each

    def limited(self, limit: int | None) -> EvalDataset:
        """The same dataset with only its first ``limit`` queries (all when ``limit`` is None)."""
        if limit is None or limit >= len(self.queries):
            return self
        queries = self.queries[:limit]
        qrels = {q.id: self.qrels[q.id] for q in queries}
        passages = {q.id: self.passage_qrels[q.id] for q in queries if q.id in self.passage_qrels}
        return EvalDataset(
            self.name,
            queries,
            MappingProxyType(qrels),
            self.corpus_path,
            self.kind,
            MappingProxyType(passages),
            self.notes,
        )

    def of_namespace(self, namespace: str) -> EvalDataset:
        """The same dataset with only the queries of ``namespace`` (and those that name none: they
        search it), and a note of how many other namespaces' queries were left out; a
        ``UsageError`` when none is left (``kbctl eval run -n NS``, ``kbctl reembed NS --eval``)."""
        kept = tuple(q for q in self.queries if q.namespace in (None, namespace))
        if len(kept) == len(self.queries):
            return self
        if not kept:
            named = sorted({q.namespace for q in self.queries if q.namespace})
            raise UsageError(
                f"dataset {self.name!r} has no query for namespace {namespace!r}",
                hint=f"its queries are of: {', '.join(named)}",
            )
        others = sorted({q.namespace for q in self.queries if q.namespace not in (None, namespace)})
        left = len(self.queries) - len(kept)
        note = (
            f"left out {left} {'query' if left == 1 else 'queries'} of other namespaces ({', '.join(others)}):"
            f" evaluated the {len(kept)} of {namespace}"
        )
        qrels = {q.id: self.qrels[q.id] for q in kept}
        passages = {q.id: self.passage_qrels[q.id] for q in kept if q.id in self.passage_qrels}
        return EvalDataset(
            self.name,
            kept,
            MappingProxyType(qrels),
            self.corpus_path,
            self.kind,
            MappingProxyType(passages),
            (*self.notes, note),
        )


def _error(path: Path, line: int | None, message: str, hint: str | None = None) -> ConfigError:
    where = f"{path}:{line}" if line is not None else str(path)
    return ConfigError(f"{where}: {message}", hint=hint)


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of a UTF-8 file, gunzipped when its name ends in ``.gz``, without a
    byte order mark at its start; a file that cannot be read, or a line that is not UTF-8, is a
    ``ConfigError`` naming the file and line (not a traceback)."""
    try:
        fh = gzip.open(path, "rb") if path.name.endswith(".gz") else path.open("rb")  # noqa: SIM115 (closed below)
    except OSError as exc:
        raise _error(
            path, None, f"cannot read: {exc.strerror or exc}", hint="check the path and its permissions"
        ) from exc
    with fh:
        lineno = 0
        try:
            for lineno, raw in enumerate(fh, start=1):
                if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]  # a BOM (Windows editors write one) is not part of the first line
                try:
                    yield lineno, raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise _error(path, lineno, "not UTF-8 text", hint="save the file as UTF-8") from None
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            raise _error(
                path, None, f"not a readable gzip file ({exc or type(exc).__name__}, after line {lineno})"
            ) from None


def _read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, object)`` for each non-blank line; bad JSON is a ``ConfigError``."""
    for lineno, line in _lines(path):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _error(path, lineno, f"not valid JSON ({exc.msg})") from exc
        if not isinstance(obj, dict):
            raise _error(path, lineno, "expected a JSON object")
        yield lineno, obj


def _as_id(value: Any, path: Path, lineno: int, field: str) -> str:
    """Ids may be written as strings or integers; anything else (or empty) is an error."""
    if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value).strip() == "":
        raise _error(path, lineno, f"{field!r} must be a non-empty string")
    return str(value)


def _as_text(value: Any, path: Path, lineno: int, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _error(path, lineno, f"{field!r} must be a non-empty string")
    if "\x00" in value:  # the search refuses it: said here, with its line, not when the run gets there
        raise _error(path, lineno, f"{field!r} holds a NUL character", hint="remove it from the text")
    return value


def _as_grade(value: Any, path: Path, lineno: int, docid: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise _error(path, lineno, f"grade of {docid!r} must be an integer, got {value!r}")
    return value


# --- BEIR -------------------------------------------------------------------------------------


def _qrels_header(cols: list[str], path: Path) -> tuple[int, int, int]:
    """Where a header line puts ``query-id``, ``corpus-id`` and ``score`` (other columns are ignored)."""
    for name in QRELS_COLUMNS:
        if name not in cols:
            raise _error(
                path, 1, f"the header names no {name!r} column", hint="name the columns " + ", ".join(QRELS_COLUMNS)
            )
    return cols.index("query-id"), cols.index("corpus-id"), cols.index("score")


def read_qrels_tsv(path: Path) -> dict[str, dict[str, int]]:
    """Read a BEIR qrels file (gunzipped when its name ends in ``.gz``): ``query-id``, ``corpus-id``,
    ``score``, tab-separated. The header line is optional; when it is there it names the columns, which may then come in any order and with
    others beside them (ignored). Without it a row has exactly those three."""
    if not path.is_file():
        raise _error(path, None, "qrels file not found", hint=_splits_hint(path.parent))
    qrels: dict[str, dict[str, int]] = {}
    at, width = (0, 1, 2), 3
    for lineno, line in _lines(path):
        cols = [c.strip() for c in line.rstrip("\r\n").split("\t")]
        if not line.strip():
            continue
        if lineno == 1 and cols[0] in QRELS_COLUMNS:
            at, width = _qrels_header(cols, path), len(cols)
            continue
        if len(cols) != width:
            raise _error(
                path,
                lineno,
                f"expected {width} tab-separated columns, got {len(cols)}",
                hint="a row is query-id, corpus-id, score separated by tabs; with other columns, name them all "
                "in a header line (query-id, corpus-id, score and the others)"
                if width == 3
                else "every row has the header's columns",
            )
        qid, docid, score = (cols[i] for i in at)
        try:
            grade = int(score)
        except ValueError:
            raise _error(path, lineno, f"score must be an integer, got {score!r}") from None
        if docid in qrels.setdefault(qid, {}):
            raise _error(path, lineno, f"duplicate judgement for query {qid!r}, document {docid!r}")
        qrels[qid][docid] = grade
    if not qrels:
        raise _error(path, None, "judges no query", hint="a row is query-id, corpus-id, score separated by tabs")
    return qrels


def _qrels_files(qrels_dir: Path) -> dict[str, Path]:
    """The qrels files of a folder by split: ``<split>.tsv``, or ``<split>.tsv.gz`` when only that is there."""
    if not qrels_dir.is_dir():
        return {}
    found: dict[str, Path] = {}
    for path in sorted(qrels_dir.glob("*.tsv.gz")) + sorted(qrels_dir.glob("*.tsv")):  # a plain file wins
        if path.is_file():
            found[path.name[: -len(".gz")] if path.name.endswith(".gz") else path.name] = path
    return {name[: -len(".tsv")]: found[name] for name in sorted(found)}


def qrels_file(dir: Path, split: str) -> Path:
    """``dir/qrels/<split>.tsv``, or ``<split>.tsv.gz`` when only that is there (a missing file is
    reported under the plain name)."""
    plain = Path(dir) / "qrels" / f"{split}.tsv"
    packed = plain.with_name(plain.name + ".gz")
    return packed if not plain.is_file() and packed.is_file() else plain


def _splits_hint(qrels_dir: Path) -> str:
    splits = list(_qrels_files(qrels_dir))
    if not splits:
        return f"no qrels/*.tsv in {qrels_dir.parent}; " + BEIR_LAYOUT
    return f"splits here: {', '.join(splits)} (--split {splits[0]})"


def beir_file(dir: Path, stem: str) -> Path:
    """``dir/<stem>.jsonl``, or ``<stem>.jsonl.gz`` when only that is there (a missing file is
    reported by the reader, under the plain name)."""
    plain = Path(dir) / f"{stem}.jsonl"
    packed = plain.with_name(plain.name + ".gz")
    return packed if not plain.is_file() and packed.is_file() else plain


def _note_list(items: list[str], quote: bool = True) -> str:
    shown = ", ".join(repr(i) if quote else i for i in items[:SHOWN])
    return shown + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def load_beir(dir: Path, split: str = "test") -> EvalDataset:
    """Load a BEIR-layout folder: the queries of ``qrels/<split>.tsv`` with their judgements.

    As BEIR's loader, this reads only what the split judges: a query the split does not judge is
    skipped even when it has no text (counted in ``notes``); a judged query without a text is an
    error naming its line. A judged query missing from ``queries.jsonl`` is not evaluated (a note
    counts them), as pytrec_eval leaves out a query the run does not hold; none there is an error.
    """
    dir = Path(dir)
    qrels_path = qrels_file(dir, split)
    qrels_name = f"qrels/{qrels_path.name}"
    qrels = read_qrels_tsv(qrels_path)
    queries_path = beir_file(dir, "queries")
    texts: dict[str, str] = {}
    first_line: dict[str, int] = {}
    untexted: list[str] = []
    for lineno, obj in _read_jsonl(queries_path):
        qid = _as_id(obj.get("_id"), queries_path, lineno, "_id")
        text = obj.get("text")
        if isinstance(text, str) and text.strip():
            if qid in qrels:
                if qid in texts and texts[qid] != text:  # which one would be searched?
                    raise _error(
                        queries_path,
                        lineno,
                        f"query {qid!r} is given again (first on line {first_line[qid]}) with another text",
                        hint="give each query one line, or a new _id (and its rows in " + qrels_name + ")",
                    )
                if "\x00" in text:  # the search refuses it: said here, with its line
                    raise _error(queries_path, lineno, f"query {qid!r} holds a NUL character", hint="remove it")
                texts[qid] = text
                first_line.setdefault(qid, lineno)
        elif qid in qrels:
            raise _error(
                queries_path,
                lineno,
                f"query {qid!r} is judged in {qrels_name} but has no text",
                hint=f"give it a non-empty 'text', or remove its rows from {qrels_name}",
            )
        else:
            untexted.append(str(lineno))
    notes = []
    if untexted:
        one = len(untexted) == 1
        notes.append(
            f"{queries_path}: {_plural(len(untexted), 'query', 'queries')} not judged in {qrels_name}"
            f" {'has' if one else 'have'} no text and {'was' if one else 'were'} skipped"
            f" ({'line' if one else 'lines'} {_note_list(untexted, quote=False)})"
        )
    missing = [qid for qid in qrels if qid not in texts]
    if missing and len(missing) == len(qrels):
        raise _error(
            qrels_path,
            None,
            f"none of the {len(qrels)} judged queries is in {queries_path.name}: {_note_list(missing)}",
            hint=f"the query-id column of {qrels_name} names the _id of a line of {queries_path.name}",
        )
    if missing:
        notes.append(
            f"{qrels_path}: {_plural(len(missing), 'judged query is', 'judged queries are')} not in"
            f" {queries_path.name} and {'is' if len(missing) == 1 else 'are'} not evaluated: {_note_list(missing)}"
        )
    # keep the order of queries.jsonl, only the judged ones
    queries = tuple(EvalQuery(qid, text) for qid, text in texts.items())
    corpus = beir_file(dir, "corpus")
    frozen = MappingProxyType({q.id: MappingProxyType(qrels[q.id]) for q in queries})
    return EvalDataset(
        dir.name, queries, frozen, corpus if corpus.is_file() else None, "beir", MappingProxyType({}), tuple(notes)
    )


def beir_relevant_documents(dir: Path) -> dict[str, set[str]]:
    """The documents each split's qrels judge relevant (grade above 0), by split; a qrels file that
    cannot be read is left out (``load_beir`` reports it when that split is evaluated)."""
    out: dict[str, set[str]] = {}
    qrels_dir = Path(dir) / "qrels"
    for split, path in _qrels_files(qrels_dir).items():
        try:
            qrels = read_qrels_tsv(path)
        except ConfigError:
            continue
        out[split] = {d for rel in qrels.values() for d, g in rel.items() if g > 0}
    return out


def check_beir_corpus(dir: Path) -> None:
    """A ``ConfigError`` unless ``dir`` is a folder holding ``corpus.jsonl`` (or ``.jsonl.gz``)."""
    dir = Path(dir)
    if not dir.is_dir():
        raise _error(dir, None, "no such folder (a BEIR corpus is a folder holding corpus.jsonl)", hint=BEIR_LAYOUT)
    corpus = beir_file(dir, "corpus")
    if not corpus.is_file():
        raise _error(corpus, None, "not found: the folder is not a BEIR corpus", hint=BEIR_LAYOUT)


def iter_beir_corpus(dir: Path) -> Iterator[dict[str, Any]]:
    """Stream ``corpus.jsonl`` (or ``corpus.jsonl.gz``) as dicts with ``_id``, ``title``, ``text``,
    ``metadata``."""
    path = beir_file(Path(dir), "corpus")
    for lineno, obj in _read_jsonl(path):
        doc_id = _as_id(obj.get("_id"), path, lineno, "_id")
        title, text = obj.get("title") or "", obj.get("text")
        if text is None:
            text = ""
        if not isinstance(title, str) or not isinstance(text, str):
            raise _error(path, lineno, "'title' and 'text' must be strings")
        metadata = obj.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise _error(path, lineno, "'metadata' must be an object")
        yield {"_id": doc_id, "title": title, "text": text, "metadata": metadata}


# --- golden -----------------------------------------------------------------------------------


def _golden_relevant(value: Any, path: Path, lineno: int) -> dict[str, int]:
    if isinstance(value, list):
        pairs = [(_as_id(d, path, lineno, "relevant"), 1) for d in value]
    elif isinstance(value, dict):
        pairs = [(_as_id(d, path, lineno, "relevant"), _as_grade(g, path, lineno, d)) for d, g in value.items()]
    else:
        raise _error(path, lineno, "'relevant' must be an object {docid: grade} or a list of ids")
    if not any(g > 0 for _, g in pairs):
        raise _error(path, lineno, "'relevant' names no document with a grade above 0")
    return dict(pairs)


def _golden_passages(value: Any, path: Path, lineno: int) -> dict[str, int]:
    if not isinstance(value, dict) or not value:
        raise _error(path, lineno, "'passages' must be an object {\"DOC#HEADING\": grade}")
    out = {}
    for key, grade in value.items():
        doc, _, heading = str(key).rpartition(PASSAGE_SEP)
        if not doc.strip() or not heading.strip():
            raise _error(path, lineno, f"passage {key!r} must be written DOC#HEADING")
        out[str(key)] = _as_grade(grade, path, lineno, str(key))
    return out


def _golden_line(obj: dict[str, Any], path: Path, lineno: int) -> tuple[EvalQuery, dict[str, int]]:
    for key in obj:
        if key not in GOLDEN_KEYS:
            close = difflib.get_close_matches(key, GOLDEN_KEYS, n=1)
            raise _error(
                path,
                lineno,
                f"unknown key {key!r}",
                hint=f"did you mean {close[0]!r}?" if close else f"keys: {', '.join(GOLDEN_KEYS)}",
            )
    qid = _as_id(obj.get("id"), path, lineno, "id")
    text = _as_text(obj.get("query"), path, lineno, "query")
    namespace = obj.get("namespace")
    if namespace is not None:
        namespace = _as_text(namespace, path, lineno, "namespace")
    return EvalQuery(qid, text, namespace), _golden_relevant(obj.get("relevant"), path, lineno)


def load_golden(path: Path) -> EvalDataset:
    """Load a JSONL golden set (see the module docstring for the line format)."""
    path = Path(path)
    queries: list[EvalQuery] = []
    qrels: dict[str, Mapping[str, int]] = {}
    passage_qrels: dict[str, Mapping[str, int]] = {}
    for lineno, obj in _read_jsonl(path):
        query, relevant = _golden_line(obj, path, lineno)
        if query.id in qrels:
            raise _error(path, lineno, f"duplicate query id {query.id!r}")
        if obj.get("passages") is not None:
            passages = _golden_passages(obj["passages"], path, lineno)
            for key, grade in passages.items():
                relevant.setdefault(key.rpartition(PASSAGE_SEP)[0], grade)
            passage_qrels[query.id] = MappingProxyType(passages)
        queries.append(query)
        qrels[query.id] = MappingProxyType(relevant)
    if not queries:
        raise _error(path, None, "no queries in the golden set")
    # "eval/queries.jsonl" is better named after its folder
    name = path.parent.name if path.stem == "queries" and path.parent.name else path.stem
    return EvalDataset(name, tuple(queries), MappingProxyType(qrels), None, "golden", MappingProxyType(passage_qrels))


def load_dataset(path: Path, split: str = "test") -> EvalDataset:
    """Load a BEIR folder (has ``corpus.jsonl`` or ``qrels/``) or a golden ``.jsonl`` file."""
    path = Path(path)
    if path.is_dir():
        if beir_file(path, "corpus").is_file() or (path / "qrels").is_dir():
            return load_beir(path, split)
        raise _error(path, None, "folder is not a BEIR collection (no corpus.jsonl or qrels/)", hint=BEIR_LAYOUT)
    if path.suffix == ".jsonl" and path.is_file():
        return load_golden(path)
    raise _error(
        path,
        None,
        "not found, or neither a BEIR folder nor a .jsonl golden set",
        hint="give a golden .jsonl file (query, namespace, relevant) or a BEIR folder (corpus.jsonl, queries.jsonl, qrels/)",
    )
