"""The typed parts of a profile: built once from the merged TOML, every rule a one-line ConfigError."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os

import pytest

from kbctl.config import (
    FUSIONS,
    RERANK_KINDS,
    SEARCH_MODES,
    ChunkSettings,
    HnswSettings,
    LexicalSettings,
    Profile,
    RerankSettings,
    SearchSettings,
    load_settings,
)
from kbctl.errors import ConfigError
from tests.conftest import run_kbctl


def _table(**parts) -> dict:
    """The merged table of the default profile, with ``parts`` ({"hnsw": {"m": 1}}) laid over it."""
    t = copy.deepcopy(load_settings(env={}).data["profile"])
    for part, values in parts.items():
        t[part].update(values)
    return t


def _load(**parts) -> Profile:
    return Profile.from_table("mine", _table(**parts))


BAD_VALUES = [
    ("chunk", "size", 8, "chunk.size must be >= 16, got 8"),
    ("chunk", "overlap", -1, "chunk.overlap must be >= 0"),
    ("chunk", "overlap", 200, r"chunk.overlap \(200\) must be less than chunk.size \(200\)"),
    ("chunk", "strategy", "paragraphs", "chunk.strategy must be one of 'structure', 'semantic'"),
    ("chunk", "semantic_threshold", 1.5, r"chunk.semantic_threshold must be in -1..1"),
    ("hnsw", "m", 1, r"hnsw.m must be in 2..100, got 1"),
    ("hnsw", "m", 101, r"hnsw.m must be in 2..100"),
    ("hnsw", "ef_construction", 3, r"hnsw.ef_construction must be in 4..1000"),
    ("hnsw", "ef_construction", 1001, r"hnsw.ef_construction must be in 4..1000"),
    ("hnsw", "ef_construction", 31, r"hnsw.ef_construction \(31\) must be at least 2 \* hnsw.m \(32\)"),
    ("hnsw", "ef_search", 0, r"hnsw.ef_search must be in 1..1000"),
    ("hnsw", "ef_search", 1001, r"hnsw.ef_search must be in 1..1000"),
    ("hnsw", "exact_threshold", -1, "hnsw.exact_threshold must be >= 0"),
    ("hnsw", "max_scan_tuples", 0, "hnsw.max_scan_tuples must be >= 1"),
    ("lexical", "k1", -0.1, "lexical.k1 must be >= 0"),
    ("lexical", "b", 1.5, r"lexical.b must be in 0..1"),
    ("lexical", "b", -0.5, r"lexical.b must be in 0..1"),
    ("lexical", "language", "klingon", "lexical.language 'klingon' has no Snowball stemmer"),
    ("lexical", "title_weight", -1.0, "lexical.title_weight must be >= 0"),
    ("lexical", "max_edit_distance", -1, "lexical.max_edit_distance must be >= 0"),
    ("search", "mode", "fuzzy", "search.mode must be one of 'auto', 'dense', 'lexical', 'hybrid'"),
    ("search", "k", 0, "search.k must be >= 1"),
    ("search", "candidates", 0, "search.candidates must be >= 1"),
    ("search", "fusion", "max", "search.fusion must be one of 'rrf', 'convex'"),
    ("search", "rrf_k", -1, "search.rrf_k must be >= 1"),
    ("search", "rrf_k", 0, "search.rrf_k must be >= 1, got 0"),
    ("search", "dense_weight", 1.5, r"search.dense_weight must be in 0..1"),
    ("search", "dense_weight", -0.1, r"search.dense_weight must be in 0..1"),
    ("search", "per_doc", -1, "search.per_doc must be >= 0"),
    ("search", "prf", "rm3", "search.prf must be one of 'off', 'rescore', 'hybrid'"),
    ("search", "prf_docs", 0, r"search.prf_docs must be in 1..100"),
    ("search", "prf_terms", 0, r"search.prf_terms must be in 1..200"),
    ("search", "prf_query_weight", 1.5, r"search.prf_query_weight must be in 0..1"),
    ("search", "prf_vector_weight", -0.1, r"search.prf_vector_weight must be in 0..1"),
    ("search", "prf_max_postings", -1, "search.prf_max_postings must be >= 0"),
    ("search", "dedupe_threshold", 1.1, r"search.dedupe_threshold must be in 0..1"),
    ("rerank", "kind", "llm", "rerank.kind must be one of"),
    ("rerank", "top_n", 0, "rerank.top_n must be >= 1"),
]


@pytest.mark.parametrize("part,key,value,match", BAD_VALUES, ids=[f"{p}.{k}={v!r}" for p, k, v, _ in BAD_VALUES])
def test_bad_value_names_the_profile_and_key(part, key, value, match):
    with pytest.raises(ConfigError, match=match) as e:
        _load(**{part: {key: value}})
    assert e.value.message.startswith("profile 'mine': ") and "\n" not in e.value.message


def test_an_empty_agreement_band_is_refused():
    """``prf_min_agreement`` above ``prf_max_agreement`` would turn bounded feedback off for every
    query without a word: refused, naming both keys."""
    with pytest.raises(
        ConfigError, match=r"search.prf_min_agreement \(0.6\) must not exceed search.prf_max_agreement \(0.2\)"
    ):
        _load(search={"prf_min_agreement": 0.6, "prf_max_agreement": 0.2})
    assert _load(search={"prf_min_agreement": 0.4, "prf_max_agreement": 0.4}).search.prf_max_agreement == 0.4


def test_cross_encoder_needs_a_model():
    with pytest.raises(ConfigError, match="rerank.kind is 'cross-encoder' but rerank.model is empty"):
        _load(rerank={"kind": "cross-encoder"})
    assert _load(rerank={"kind": "cross-encoder", "model": "/models/ce"}).rerank.model == "/models/ce"


def test_chunk_size_over_max_tokens():
    with pytest.raises(ConfigError, match="chunk.size 300 exceeds max_tokens 256"):
        _load(chunk={"size": 300})


@pytest.mark.parametrize(
    "part,key,value,want,got",
    [
        ("hnsw", "m", "16", "int", "str"),
        ("hnsw", "ef_search", True, "int", "bool"),
        ("search", "k", 10.0, "int", "float"),
        ("search", "dense_weight", False, "float", "bool"),
        ("search", "mode", 1, "str", "int"),
        ("lexical", "language", None, "str", "NoneType"),
    ],
)
def test_wrong_type(part, key, value, want, got):
    with pytest.raises(ConfigError, match=f"'{part}.{key}' must be {want}, got {got}"):
        _load(**{part: {key: value}})


def test_wrong_type_from_the_user_file_and_from_overrides(tmp_path):
    p = tmp_path / "kbctl.toml"
    p.write_text("[profile.hnsw]\nm = true\n")
    with pytest.raises(ConfigError, match="'profile.hnsw.m' must be int, got bool"):
        load_settings(p, env={})
    s = load_settings(overrides={"profile.search.k": "10"}, env={})
    with pytest.raises(ConfigError, match="profile 'minilm': 'search.k' must be int, got str"):
        s.profile()
    p.write_text("[profiles.minilm.hnsw]\nm = 16.5\n")  # the file layer lets a float through; the profile does not
    with pytest.raises(ConfigError, match="'hnsw.m' must be int, got float"):
        load_settings(p, env={}).profile()


def test_an_int_where_a_float_is_expected_is_kept_as_written():
    p = _load(lexical={"k1": 1, "title_weight": 2}, search={"dense_weight": 1})
    assert (p.lexical.k1, p.lexical.title_weight, p.search.dense_weight) == (1, 2, 1)


def test_missing_unknown_and_non_table_parts():
    t = _table()
    del t["hnsw"]["m"]
    with pytest.raises(ConfigError, match="missing key 'hnsw.m'"):
        Profile.from_table("mine", t)
    with pytest.raises(ConfigError, match="unknown key 'search.candidats'") as e:
        _load(search={"candidats": 3})
    assert e.value.hint == "did you mean 'candidates'?"
    t = _table()
    t["rerank"] = "cross-encoder"
    with pytest.raises(ConfigError, match="'rerank' must be a table"):
        Profile.from_table("mine", t)


def test_defaults_load_with_the_right_types():
    p = load_settings(env={}).profile("minilm")
    assert p.chunk == ChunkSettings(
        size=200, overlap=32, strategy="structure", semantic_threshold=0.35, max_document_chars=50_000_000
    )
    assert p.hnsw == HnswSettings(
        m=16, ef_construction=64, ef_search=100, exact_threshold=1000, max_scan_tuples=20000, build_memory_mb=1024
    )
    assert p.lexical == LexicalSettings(k1=0.9, b=0.4, language="english", title_weight=1.0, max_edit_distance=2)
    assert p.search == SearchSettings(
        mode="auto",
        k=10,
        candidates=100,
        fusion="convex",
        rrf_k=30,
        dense_weight=0.5,
        per_doc=0,
        dedupe_threshold=0.9,
        prf="rescore",
        prf_docs=10,
        prf_terms=10,
        prf_query_weight=0.8,
        prf_vector_docs=3,
        prf_vector_weight=0.5,
        prf_max_postings=50000,
        prf_candidates=200,
        prf_min_agreement=0.1,
        prf_max_agreement=0.5,
        prf_dense_weight=0.6,
    )
    assert p.rerank == RerankSettings(kind="", model="", top_n=50)
    for part in (p.chunk, p.hnsw, p.lexical, p.search, p.rerank):
        for f in dataclasses.fields(part):
            assert type(getattr(part, f.name)).__name__ == f.type, f.name
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.hnsw.m = 4  # type: ignore[misc]


def test_valid_edges_load():
    p = _load(
        hnsw={"m": 2, "ef_construction": 4, "ef_search": 1000},
        chunk={"size": 16, "overlap": 15},
        lexical={"language": "none", "b": 1.0},
        search={"dense_weight": 0.0, "fusion": "convex", "mode": "hybrid"},
    )
    assert (p.hnsw.m, p.chunk.overlap, p.lexical.language, p.search.fusion) == (2, 15, "none", "convex")
    assert _load(lexical={"language": "french"}).lexical.language == "french"


def test_source_hash_is_what_the_plain_tables_gave():
    """Stores filled before the parts were typed stay incremental: the same settings, the same hash
    before the sentence splitter's revision (``previous_source_hash``, which the producer recognises:
    ``tests/db/test_sentence_ends_rechunk.py``), and that hash with the revision now."""
    from kbctl.chunk import SENTENCE_ENDS
    from kbctl.ingest.steps import previous_source_hash, source_hash

    p = load_settings(env={}).profile("minilm")
    old_chunk = {"size": 200, "overlap": 32, "strategy": "structure", "semantic_threshold": 0.35}
    old = json.dumps([old_chunk, p.max_tokens, p.fingerprint], sort_keys=True)
    sha = "0" * 64
    assert previous_source_hash(sha, p) == hashlib.sha256(f"{sha}\x00{old}".encode()).hexdigest()
    now = json.dumps([old_chunk, p.max_tokens, p.fingerprint, SENTENCE_ENDS], sort_keys=True)
    assert source_hash(sha, p) == hashlib.sha256(f"{sha}\x00{now}".encode()).hexdigest()


def test_an_extractors_revision_is_in_the_source_hash_only_when_it_moved():
    """A format whose extractor never moved (revision "") hashes as before revisions were counted;
    one that moved hashes apart, under every splitter revision the producer may restamp from, so a
    source stored before its extractor moved matches none of them (it is read again)."""
    from kbctl.chunk import MOVED_SINCE, SENTENCE_ENDS
    from kbctl.ingest.steps import previous_source_hash, source_hash

    p = load_settings(env={}).profile("minilm")
    old_chunk = {"size": 200, "overlap": 32, "strategy": "structure", "semantic_threshold": 0.35}
    sha = "0" * 64
    now = json.dumps([old_chunk, p.max_tokens, p.fingerprint, SENTENCE_ENDS, {"extract": "pdf-2"}], sort_keys=True)
    assert source_hash(sha, p, "pdf-2") == hashlib.sha256(f"{sha}\x00{now}".encode()).hexdigest()
    assert source_hash(sha, p, "") == source_hash(sha, p)
    for revision in MOVED_SINCE:
        assert previous_source_hash(sha, p, revision, "pdf-2") != previous_source_hash(sha, p, revision)
    # an extractor's revision is never taken for a splitter's
    assert previous_source_hash(sha, p, "", "pdf-2") != previous_source_hash(sha, p, "pdf-2")


def test_replace_keeps_the_parts_typed():
    p = load_settings(env={}).profile("minilm")
    q = dataclasses.replace(p, search=dataclasses.replace(p.search, k=3, fusion="convex"))
    assert (q.search.k, q.search.fusion, p.search.k) == (3, "convex", 10)


def test_enums_match_the_search_modules():
    from kbctl.search.engine import MODES
    from kbctl.search.fuse import FUSIONS as FUSE_METHODS

    assert SEARCH_MODES == MODES and FUSIONS == FUSE_METHODS


def test_a_registered_reranker_kind_is_accepted():
    from kbctl.search.rerank import register_reranker

    with pytest.raises(ConfigError, match="rerank.kind"):
        _load(rerank={"kind": "test-kind"})
    register_reranker("test-kind", lambda p: None)  # type: ignore[arg-type,return-value]
    try:
        assert _load(rerank={"kind": "test-kind"}).rerank.kind == "test-kind"
    finally:
        RERANK_KINDS.discard("test-kind")


def _refused(tmp_path, toml: str, command: str):
    """``kbctl --config FILE config COMMAND`` of a config holding ``toml``, refused (exit 2):
    the run, its config file and its stderr's lines."""
    cfg = tmp_path / "kbctl.toml"
    cfg.write_text(toml)
    env = {k: None for k in os.environ if k.startswith("KBCTL_")} | {"KBCTL_HOME": str(tmp_path / "home")}
    r = run_kbctl(["--config", str(cfg), "config", command], env=env)
    stderr = r.stderr.decode()
    assert r.returncode == 2, stderr
    return r, cfg, stderr.strip().splitlines()


def test_cli_reports_a_bad_setting_in_one_line(tmp_path):
    r, _, lines = _refused(tmp_path, "[profile.hnsw]\nm = 1\n", "show")
    stderr = r.stderr.decode()
    assert len(lines) == 2 and "hnsw.m must be in 2..100, got 1" in lines[0], stderr  # and its hint
    assert lines[1] == "hint: the default is 16 (configs/default.toml documents every key)", stderr
    assert r.stdout == b""


def test_a_profiles_rrf_k_of_zero_is_refused_in_one_line_naming_the_file_and_key(tmp_path):
    """RRF with k = 0 is degenerate (1/rank); a query's ``--rrf-k`` must be at least 1, and so must a
    profile's: ``config check`` names the file, its line and the key, and the default as the hint."""
    r, cfg, lines = _refused(tmp_path, "[profile.search]\nrrf_k = 0\n", "check")
    stderr = r.stderr.decode()
    assert lines[0] == f"error: {cfg}:2: profile 'minilm': search.rrf_k must be >= 1, got 0", stderr
    assert lines[1] == "hint: the default is 30 (configs/default.toml documents every key)", stderr
    assert len(lines) == 2 and r.stdout == b""
    assert _load(search={"rrf_k": 1}).search.rrf_k == 1


def test_a_profile_measured_in_words_has_the_word_counts_revision_in_its_source_hash():
    """A ``hash`` profile's chunks are measured by the word tokenizer, which counts unspaced scripts
    by the character since session 41: its stored sources hash differently, so the next ingest
    chunks them again (the same fingerprint: its vectors did not change)."""
    from kbctl.ingest.steps import source_hash

    p = load_settings(env={}).profile("hash-384")
    old_chunk = {"size": 200, "overlap": 32, "strategy": "structure", "semantic_threshold": 0.35}
    old = json.dumps([old_chunk, p.max_tokens, p.fingerprint], sort_keys=True)
    sha = "0" * 64
    assert source_hash(sha, p) != hashlib.sha256(f"{sha}\x00{old}".encode()).hexdigest()
    assert source_hash(sha, p) == source_hash(sha, load_settings(env={}).profile("hash-384"))
    assert source_hash(sha, p) != source_hash("1" * 64, p)
