"""Sanity checks for sample_corpus/: counts, formats, eval fixture, planted identifiers.

    .venv/bin/python sample_corpus/_tools/check_corpus.py

Standard library only; uses pdfplumber (if installed) to count PDF pages and to look for
identifiers inside PDFs. Exits non-zero when a check fails.
"""
from __future__ import annotations

import email
import email.policy
import json
import mailbox
import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FOLDERS = {
    "support/billing": "billing_kb",
    "support/technical": "technical_kb",
    "support/account": "account_kb",
    "engineering/handbook": "handbook_kb",
    "engineering/releases": "releases_kb",
}
REQUIRED_FORMATS = {
    "support/billing": {"md", "txt", "html", "pdf", "eml"},
    "support/technical": {"md", "txt", "html", "pdf"},
    "support/account": {"md", "txt", "eml", "mbox"},
    "engineering/handbook": {"md", "txt", "html", "pdf"},
    "engineering/releases": {"rss", "atom"},
}
# Exact identifiers a lexical search must find: each must occur in 1 or 2 files, and in these.
PLANTED = {
    "LMN-4012": {"support/technical/api-error-codes.md", "support/technical/api-authentication.md"},
    "LMN-5003": {"support/technical/api-error-codes.md", "support/technical/query-timeouts.txt"},
    "E_RATE_LIMITED": {"support/technical/api-error-codes.md", "support/technical/rate-limits.md"},
    "HTTP 429": {"support/technical/api-error-codes.md", "support/technical/rate-limits.md"},
    "E_SAML_AUDIENCE_MISMATCH": {"support/technical/sso-saml-setup.md"},
    "E_WEBHOOK_SIGNATURE_INVALID": {"support/technical/webhooks.md"},
    "v2.8.0": {"support/technical/cli-reference.md"},
    "v3.14.2": {"support/technical/sdk-installation.md", "engineering/releases/releases.rss"},
    "PAY-1051": {"support/billing/failed-payments.txt"},
    "PAY-3DS-REQUIRED": {"support/billing/payment-methods.md"},
    "SKU-TEAM-ANNUAL-2024": {"support/billing/plan-changes.md", "support/billing/pricing-and-plans.pdf"},
    "SKU-ADDON-SEATS-10": {"support/billing/pricing-and-plans.pdf"},
    "SKU-STARTER-MONTHLY-2024": {"support/billing/pricing-and-plans.pdf"},
    "INV-2024-00817": {"support/billing/invoice-wire-transfer.eml"},
    "CN-2024-0042": {"support/billing/credit-notes.md"},
    "ACC-LOCK-03": {"support/account/account-lockout.txt"},
    "DSR-2024-11873": {"support/account/data-export-ready.eml"},
    "T-58213": {"support/account/lost-2fa-device-thread.mbox"},
    "INC-2024-031": {"engineering/handbook/postmortem-2024-03-ingest-outage.md"},
    "shipit v0.7.3": {"engineering/handbook/deploys.md"},
}
MAX_BYTES = 200 * 1024

errors: list[str] = []


def fail(msg: str) -> None:
    errors.append(msg)


def fmt(p: Path) -> str:
    return "rss" if p.suffix == ".xml" else p.suffix.lstrip(".")


def pdf_pages(p: Path) -> list[str] | None:
    try:
        import pdfplumber
    except ImportError:
        return None
    with pdfplumber.open(p) as pdf:
        return [(pg.extract_text() or "") for pg in pdf.pages]


def mbox_ids(p: Path) -> list[tuple[str, str | None]]:
    box = mailbox.mbox(str(p), create=False)
    out = [(m["Message-ID"].strip().strip("<>"), m["In-Reply-To"]) for m in box]
    box.close()
    return out


def feed_ids(p: Path) -> list[str]:
    tree = ET.parse(p)
    r = tree.getroot()
    if r.tag == "rss":
        items = r.findall("./channel/item")
        for it in items:
            for tag in ("guid", "link", "pubDate", "description", "title"):
                if it.find(tag) is None or not (it.find(tag).text or "").strip():
                    fail(f"{p.name}: item without <{tag}>")
        return [it.find("guid").text.strip() for it in items]
    ns = {"a": "http://www.w3.org/2005/Atom"}
    entries = r.findall("a:entry", ns)
    for e in entries:
        for tag in ("id", "title", "updated"):
            if e.find(f"a:{tag}", ns) is None:
                fail(f"{p.name}: entry without <{tag}>")
    return [e.find("a:id", ns).text.strip() for e in entries]


def text_of(p: Path) -> str:
    if p.suffix == ".pdf":
        pages = pdf_pages(p)
        return "\n".join(pages) if pages is not None else ""
    return p.read_text(encoding="utf-8", errors="replace")


def words(p: Path) -> int:
    t = text_of(p)
    if p.suffix in (".html", ".rss", ".atom", ".xml"):
        t = re.sub(r"<[^>]+>", " ", t)
    return len(t.split())


def main() -> int:
    docs_in: dict[str, list[Path]] = {}
    doc_units: dict[str, int] = {}
    sub_ids: dict[str, set[str]] = {}  # "path" -> ids addressable as path#id
    fmt_counts: dict[str, Counter] = {}
    all_files: list[Path] = []

    for folder in FOLDERS:
        d = ROOT / folder
        files = sorted(p for p in d.iterdir() if p.is_file() and not p.name.startswith("."))
        docs_in[folder] = files
        all_files += files
        fmt_counts[folder] = Counter(fmt(p) for p in files)
        units = 0
        for p in files:
            rel = p.relative_to(ROOT).as_posix()
            if p.stat().st_size > MAX_BYTES:
                fail(f"{rel}: {p.stat().st_size} bytes > 200 KB")
            if p.suffix == ".mbox":
                ids = mbox_ids(p)
                sub_ids[rel] = {i for i, _ in ids}
                units += len(ids)
                if len(ids) < 3:
                    fail(f"{rel}: mbox has {len(ids)} messages (< 3)")
                if sum(1 for _, irt in ids if irt) < 2:
                    fail(f"{rel}: mbox thread lacks In-Reply-To headers")
            elif fmt(p) in ("rss", "atom"):
                ids = feed_ids(p)
                sub_ids[rel] = set(ids)
                units += len(ids)
            elif p.suffix == ".eml":  # the message, and each attachment a document of its own (as kbctl ingest stores them)
                m = email.message_from_bytes(p.read_bytes(), policy=email.policy.default)
                units += 1 + sum(1 for part in m.walk() if part.get_filename())
            else:
                units += 1
        doc_units[folder] = units
        missing = REQUIRED_FORMATS[folder] - set(fmt_counts[folder])
        if missing:
            fail(f"{folder}: missing formats {sorted(missing)}")
        if units < 8:
            fail(f"{folder}: only {units} documents (< 8)")

    total_units = sum(doc_units.values())
    if total_units < 60:
        fail(f"only {total_units} documents in total (< 60)")
    if len(all_files) < 50:
        fail(f"only {len(all_files)} files in total (< 50)")

    # format-specific requirements
    pdfs = [p for p in all_files if p.suffix == ".pdf"]
    if len(pdfs) < 3:
        fail(f"only {len(pdfs)} PDFs (< 3)")
    page_counts = {}
    for p in pdfs:
        pages = pdf_pages(p)
        if pages is None:
            print("note: pdfplumber not installed; PDF text not checked")
            break
        page_counts[p.name] = len(pages)
        for i, t in enumerate(pages, 1):
            if len(t.split()) < 30:
                fail(f"{p.name}: page {i} extracts only {len(t.split())} words")
    if page_counts and max(page_counts.values()) < 2:
        fail("no PDF with 2+ pages")

    emls = [p for p in all_files if p.suffix == ".eml"]
    if len(emls) < 3:
        fail(f"only {len(emls)} .eml files (< 3)")
    alt = att = 0
    for p in emls:
        m = email.message_from_bytes(p.read_bytes(), policy=email.policy.default)
        types = {part.get_content_type() for part in m.walk()}
        if m.get_content_type() == "multipart/alternative" or {"text/plain", "text/html"} <= types:
            alt += 1
        if any(part.get_filename() for part in m.walk()):
            att += 1
    if not alt:
        fail("no multipart text+HTML email")
    if not att:
        fail("no email with an attachment")
    for p in all_files:
        if p.suffix == ".rss" and len(sub_ids[p.relative_to(ROOT).as_posix()]) < 5:
            fail(f"{p.name}: fewer than 5 items")
        if p.suffix == ".atom" and len(sub_ids[p.relative_to(ROOT).as_posix()]) < 3:
            fail(f"{p.name}: fewer than 3 entries")

    mds = [p for p in all_files if p.suffix == ".md"]
    yaml_fm = sum(1 for p in mds if p.read_text().startswith("---\n"))
    toml_fm = sum(1 for p in mds if p.read_text().startswith("+++\n"))
    if not yaml_fm or not toml_fm:
        fail(f"front matter: {yaml_fm} YAML, {toml_fm} TOML (need both)")
    wc = {p.relative_to(ROOT).as_posix(): words(p) for p in all_files if fmt(p) not in ("rss", "atom", "mbox")}
    long_docs = [k for k, v in wc.items() if v >= 1500]
    if not long_docs:
        fail("no document with 1,500+ words")
    if refunds := (ROOT / "support/billing/refunds.md"):
        if not refunds.exists() or "5–10 business days" not in refunds.read_text():
            fail("support/billing/refunds.md missing or lacks the 5–10 business days statement")

    # planted identifiers: exactly the expected files
    texts = {p.relative_to(ROOT).as_posix(): text_of(p) for p in all_files}
    planted_rows = []
    for ident, expected in PLANTED.items():
        found = {rel for rel, t in texts.items() if ident in t}
        planted_rows.append((ident, sorted(found)))
        if not 1 <= len(found) <= 2:
            fail(f"identifier {ident!r} found in {len(found)} files: {sorted(found)}")
        elif found != expected:
            fail(f"identifier {ident!r} found in {sorted(found)}, expected {sorted(expected)}")

    # eval fixture
    qpath = ROOT / "eval/queries.jsonl"
    per_ns = Counter()
    seen_ids = set()
    relevant_docs = set()
    n = 0
    valid_ns = set(FOLDERS.values())
    ns_folder = {v: k for k, v in FOLDERS.items()}
    for lineno, line in enumerate(qpath.read_text().splitlines(), 1):
        if not line.strip():
            continue
        n += 1
        try:
            q = json.loads(line)
        except json.JSONDecodeError as e:
            fail(f"queries.jsonl:{lineno}: invalid JSON ({e})")
            continue
        for key in ("id", "query", "namespace", "relevant"):
            if key not in q:
                fail(f"queries.jsonl:{lineno}: missing {key!r}")
        qid = q.get("id")
        if qid in seen_ids:
            fail(f"queries.jsonl:{lineno}: duplicate id {qid}")
        seen_ids.add(qid)
        ns = q.get("namespace")
        if ns not in valid_ns:
            fail(f"{qid}: unknown namespace {ns!r}")
            continue
        per_ns[ns] += 1
        rel = q.get("relevant") or {}
        if not rel or 2 not in rel.values():
            fail(f"{qid}: needs at least one document graded 2")
        for key, grade in rel.items():
            if grade not in (1, 2):
                fail(f"{qid}: grade {grade!r} for {key} not in (1, 2)")
            path, _, sub = key.partition("#")
            if not (ROOT / path).is_file():
                fail(f"{qid}: {path} does not exist")
                continue
            if not path.startswith(ns_folder[ns] + "/"):
                fail(f"{qid}: {path} is outside the folder of {ns}")
            if sub:
                if path not in sub_ids:
                    fail(f"{qid}: {path} is not an mbox or feed but has #{sub}")
                elif sub not in sub_ids[path]:
                    fail(f"{qid}: {sub!r} is not a Message-ID/guid in {path}")
            elif path in sub_ids:
                fail(f"{qid}: {path} is an mbox/feed; name the message or entry with #id")
            relevant_docs.add(key)
    if n < 60:
        fail(f"only {n} queries (< 60)")
    for ns in valid_ns:
        if per_ns[ns] < 8:
            fail(f"{ns}: only {per_ns[ns]} queries (< 8)")

    # summary
    print(f"{'folder':24} {'namespace':13} {'files':>5} {'docs':>5}  formats")
    for folder, ns in FOLDERS.items():
        f = ", ".join(f"{k}:{v}" for k, v in sorted(fmt_counts[folder].items()))
        print(f"{folder:24} {ns:13} {len(docs_in[folder]):>5} {doc_units[folder]:>5}  {f}")
    allfmt = Counter()
    for c in fmt_counts.values():
        allfmt.update(c)
    print(f"{'TOTAL':24} {'':13} {len(all_files):>5} {total_units:>5}  " + ", ".join(f"{k}:{v}" for k, v in sorted(allfmt.items())))
    print(f"\nmarkdown front matter: {yaml_fm} YAML, {toml_fm} TOML, {len(mds) - yaml_fm - toml_fm} none")
    print(f"words per file: min {min(wc.values())}, max {max(wc.values())}; 1,500+ words: {', '.join(sorted(long_docs))}")
    if page_counts:
        print("PDF pages: " + ", ".join(f"{k}={v}" for k, v in sorted(page_counts.items())))
    print(f"emails: {len(emls)} .eml ({alt} multipart text+HTML, {att} with attachment)")
    print(f"queries: {n} ({', '.join(f'{k}={v}' for k, v in sorted(per_ns.items()))}); "
          f"{len(relevant_docs)} distinct relevant documents")
    print("planted identifiers:")
    for ident, found in planted_rows:
        print(f"  {ident:26} {', '.join(found)}")
    unjudged = sorted(
        (p.relative_to(ROOT).as_posix() for p in all_files if fmt(p) not in ("rss", "atom", "mbox")),
    )
    unjudged = [u for u in unjudged if u not in relevant_docs]
    if unjudged:
        print("documents no query points to: " + ", ".join(unjudged))

    if errors:
        print(f"\nFAILED ({len(errors)} problems):")
        for e in errors:
            print("  - " + e)
        return 1
    print("\nOK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
