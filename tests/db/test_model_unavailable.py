"""A profile whose model cannot load here (a path that is not there, a model name not installed on
this offline machine) is refused before anything is made for it: no shadow generation by
``reembed``, no namespace and no run by ``ingest`` (with ``--workers`` or without). A build that
fails before it writes a vector drops the shadow it made.
"""

from __future__ import annotations

import pytest

import kbctl
from kbctl.errors import EmbeddingError
from tests.conftest import write_folder

CONFIG = """
[profiles.hash-768]
embedder = "hash"
model = "hash"
dimension = 768

[profiles.ghost-path]
model = "/nonexistent/kbctl-model-dir"
dimension = 384
precision = "fp32"

[profiles.ghost-name]
model = "no-such-org/no-such-model"
dimension = 384
precision = "fp32"

[profiles.ghost-auto]
model = "/nonexistent/kbctl-model-dir"
dimension = 384
"""

GHOSTS = ["ghost-path", "ghost-name", "ghost-auto"]


@pytest.fixture
def config(tmp_path) -> str:
    path = tmp_path / "kbctl.toml"
    path.write_text(CONFIG)
    return str(path)


@pytest.fixture
def mkb(config, kb_home, tenant):
    k = kbctl.open(config=config, home=kb_home, tenant=tenant, profile="hash-384")
    yield k
    k.close()


def _docs(tmp_path) -> str:
    return write_folder(
        tmp_path, "docs", {f"d{i}.md": f"Document {i} about gardens, boats and bread." for i in range(3)}
    )


def _said_cannot_load(e: pytest.ExceptionInfo, model: str) -> None:
    assert "cannot load embedding model" in e.value.message and model in e.value.message, e.value.message
    assert e.value.hint


@pytest.mark.parametrize("ghost", GHOSTS)
def test_a_reembed_to_a_model_that_cannot_load_leaves_no_shadow_and_the_next_profile_builds(mkb, tmp_path, ghost):
    mkb.ingest([_docs(tmp_path)], "lc")
    with pytest.raises(EmbeddingError) as e:
        mkb.generations.reembed("lc", ghost)
    _said_cannot_load(e, mkb.settings.profile(ghost).model)
    assert [g["state"] for g in mkb.generations("lc")] == ["active"]
    report = mkb.generations.reembed("lc", "hash-768")  # not refused for a shadow being built
    assert report.complete and report.chunks == 3


def test_a_build_that_fails_before_writing_a_vector_drops_the_shadow_it_made(mkb, tmp_path, monkeypatch):
    from kbctl.ingest.embedding import Embedding

    mkb.ingest([_docs(tmp_path)], "lc")

    def broken(self, texts):
        raise EmbeddingError("the model broke")

    monkeypatch.setattr(Embedding, "embed", broken)
    with pytest.raises(EmbeddingError, match="the model broke"):
        mkb.generations.reembed("lc", "hash-768")
    assert [g["state"] for g in mkb.generations("lc")] == ["active"]


def test_a_build_that_fails_after_writing_vectors_keeps_its_shadow_to_resume(mkb, tmp_path, monkeypatch):
    from kbctl.ingest.embedding import Embedding

    mkb.ingest([_docs(tmp_path)], "lc")
    real, calls = Embedding.embed, []

    def second_batch_breaks(self, texts):
        calls.append(len(texts))
        if len(calls) > 1:
            raise EmbeddingError("the model broke")
        return real(self, texts)

    monkeypatch.setattr(Embedding, "embed", second_batch_breaks)
    with pytest.raises(EmbeddingError):
        mkb.generations.reembed("lc", "hash-768", batch=1)
    shadow = [g for g in mkb.generations("lc") if g["state"] == "shadow"]
    assert len(shadow) == 1 and shadow[0]["vectors"] == 1
    monkeypatch.setattr(Embedding, "embed", real)
    assert mkb.generations.reembed("lc", "hash-768").embedded == 2  # resumed: only what was missing


@pytest.mark.parametrize("ghost", GHOSTS)
def test_an_ingest_into_a_new_namespace_with_a_model_that_cannot_load_makes_nothing(mkb, tmp_path, ghost):
    with pytest.raises(EmbeddingError) as e:
        mkb.ingest([_docs(tmp_path)], "fresh", profile=ghost)
    _said_cannot_load(e, mkb.settings.profile(ghost).model)
    assert "fresh" not in mkb.namespace_names()
    assert mkb.admin.runs() == []


@pytest.mark.parametrize("ghost", ["ghost-path", "ghost-name"])
def test_an_ingest_with_workers_refuses_a_model_that_cannot_load_before_the_run_opens(mkb, tmp_path, ghost):
    mkb.create_namespace("pinned", profile=ghost)  # made for another machine, where the model is
    with pytest.raises(EmbeddingError) as e:
        mkb.ingest([_docs(tmp_path)], "pinned", workers=2)
    _said_cannot_load(e, mkb.settings.profile(ghost).model)
    assert mkb.admin.runs() == []
    with pytest.raises(EmbeddingError):
        mkb.ingest([_docs(tmp_path)], "fresh", profile=ghost, workers=2)
    assert sorted(mkb.namespace_names()) == ["pinned"]
    assert mkb.admin.runs() == []


def test_the_cli_refuses_it_on_one_line_with_a_hint(cli, tmp_path, config):
    p = cli("ingest", _docs(tmp_path), "-n", "fresh", "--profile", "ghost-path", "--workers", "2",
            env={"KBCTL_CONFIG": config})  # fmt: skip
    lines = p.stderr.decode().strip().splitlines()
    assert p.returncode == 1 and [line.split(":")[0] for line in lines] == ["error", "hint"], p.stderr
    assert "cannot load embedding model '/nonexistent/kbctl-model-dir'" in lines[0]


def _tenants(k: kbctl.KnowledgeBase) -> set[str]:
    return {t["name"] for t in k.tenants()}


@pytest.mark.embedded_only  # with a DSN no use makes a tenant
@pytest.mark.parametrize("how", ["ingest", "ingest-default-profile", "ingest-workers", "records", "beir"])
def test_a_refused_write_of_a_tenant_never_made_leaves_no_tenant(mkb, config, kb_home, tenant, tmp_path, how):
    """The model is checked before the tenant is made (embedded, on a write's first use): the
    refusal of ``kbctl ingest`` or ``kbctl eval import`` into a tenant never made made it first."""
    newt = "x" + tenant
    corpus = tmp_path / "beir"
    corpus.mkdir()
    (corpus / "corpus.jsonl").write_text('{"_id": "d1", "title": "Gardens", "text": "About gardens and boats."}\n')
    default = "ghost-path" if how == "ingest-default-profile" else "hash-384"
    try:
        with kbctl.open(config=config, home=kb_home, tenant=newt, profile=default) as k:
            with pytest.raises(EmbeddingError) as e:
                if how == "ingest":
                    k.ingest([_docs(tmp_path)], "fresh", profile="ghost-path")
                elif how == "ingest-default-profile":
                    k.ingest([_docs(tmp_path)], "fresh")
                elif how == "ingest-workers":
                    k.ingest([_docs(tmp_path)], "fresh", profile="ghost-path", workers=2)
                elif how == "records":
                    k.ingest_records([{"id": "d1", "title": "t", "text": "gardens"}], "fresh", profile="ghost-path")
                else:
                    k.evals.import_beir(corpus, "fresh", profile="ghost-path")
            _said_cannot_load(e, "/nonexistent/kbctl-model-dir")
            assert newt not in _tenants(mkb)
            done = k.ingest([_docs(tmp_path)], "fresh", profile="hash-384", verify=False)  # the same session writes on
            assert done.run_id is not None and newt in _tenants(mkb)
    finally:
        if newt in _tenants(mkb):
            mkb.delete_tenant(newt)


def _stored_record(uri: str) -> dict:
    from tests.db.test_store_records import _record

    return _record(uri, text=f"a chunk of {uri} about refunds")


def test_a_store_of_vectors_made_upstream_loads_no_model(mkb):
    """``kbctl store`` of embedded items runs no model: with ``precision = "auto"`` not decided yet
    on this machine, it loaded the profile's model to decide (seconds and hundreds of MB), and so
    refused a profile whose model is not on this machine, where nothing was to be embedded."""
    import json

    from kbctl.ingest.stages import read_records, store_items

    prof = mkb.settings.profile("ghost-auto")
    lines = [json.dumps(_stored_record(f"file:///s{i}.md")) for i in range(2)]
    report = mkb.store(store_items(read_records(lines), prof), "stored", profile="ghost-auto")
    assert report.documents["new"] == 2 and report.chunks["embedded"] == 2, report.to_json()
    assert not report.errors and report.verify["ok"] and mkb.verify("stored").ok


@pytest.mark.parametrize("ghost", GHOSTS)
def test_a_reembed_plan_refuses_a_model_that_cannot_load_as_the_build_does(mkb, tmp_path, ghost):
    """``reembed --plan`` to a profile whose model cannot load failed measuring its speed, with the
    load's own error; it now refuses as the build does, with the check's line, and makes nothing."""
    mkb.ingest([_docs(tmp_path)], "lc")
    with pytest.raises(EmbeddingError) as planned:
        mkb.generations.reembed("lc", ghost, plan=True)
    with pytest.raises(EmbeddingError) as built:
        mkb.generations.reembed("lc", ghost)
    assert (planned.value.message, planned.value.hint) == (built.value.message, built.value.hint)
    _said_cannot_load(planned, mkb.settings.profile(ghost).model)
    assert [g["state"] for g in mkb.generations("lc")] == ["active"]


def test_the_cli_refuses_a_reembed_plan_on_the_line_the_build_refuses_with(cli, tmp_path, config):
    env = {"KBCTL_CONFIG": config}
    assert cli("-p", "hash-384", "ingest", _docs(tmp_path), "-n", "lc", env=env).returncode == 0
    planned = cli("reembed", "lc", "-p", "ghost-path", "--plan", env=env)
    built = cli("reembed", "lc", "-p", "ghost-path", env=env)
    assert planned.returncode == built.returncode == 1, planned.stderr
    assert planned.stderr == built.stderr and planned.stdout == b""
    lines = planned.stderr.decode().strip().splitlines()
    assert [line.split(":")[0] for line in lines] == ["error", "hint"], planned.stderr
