"""A real ``kbctl ingest`` process sends its spans over OTLP/HTTP (the extra ``kbctl[otel]``) to a
collector on loopback, set by the standard variables, in the trace of its ``TRACEPARENT``."""

from __future__ import annotations

import pytest

from tests.otlp import Collector, attrs

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")


def test_an_ingest_process_exports_its_spans_to_an_otlp_collector(cli_process):
    trace_id, span_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    with Collector() as collector:
        p = cli_process(
            "-p", "hash-384", "ingest", "sample_corpus/support/billing", "-n", "billing_kb",
            env={
                "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
                "OTEL_SERVICE_NAME": "kbctl-test",
                "TRACEPARENT": f"00-{trace_id}-{span_id}-01",
            },
        )  # fmt: skip
    assert p.returncode == 0, p.stderr.decode()
    received = collector.resource_spans()
    spans = [s for _, s in received]
    services = {resource.get("service.name") for resource, _ in received}
    names = {s.name for s in spans}
    assert {"kbctl.ingest", "kbctl.ingest.fetch", "kbctl.ingest.extract", "kbctl.ingest.store"} <= names, names
    assert services == {"kbctl-test"}, collector.describe()
    assert {s.trace_id.hex() for s in spans} == {trace_id}, collector.describe()
    root = next(s for s in spans if s.name == "kbctl.ingest")
    assert root.parent_span_id.hex() == span_id


def _wait_for_run(cli, namespace: str) -> int:
    """The run of ``namespace`` once it is running with a work queue (``kbctl progress``, in this
    process: polling it with a process each time cost a second a poll)."""
    import json
    import time

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        p = cli("progress", "-n", namespace, "--json")
        rows = json.loads(p.stdout) if p.returncode == 0 and p.stdout.strip() else []
        if rows and rows[0]["status"] == "running" and rows[0]["items"]:
            return int(rows[0]["run_id"])
        time.sleep(0.3)
    raise AssertionError("no running run with a work queue")


def test_a_distributed_ingest_traces_each_workers_batch_in_the_runs_trace(cli, cli_process, kb_home, tenant):
    """``kbctl ingest --workers``: each batch a worker claims is a ``kbctl.ingest.batch`` span, a
    child of the coordinator's ``kbctl.ingest``, whether the worker is one the coordinator started
    (``TRACEPARENT``) or one started elsewhere (the traceparent stored with the run)."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    collector = Collector()
    otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "200"}
    trace_id, span_id = "5cf92f3577b34da6a3ce929d0e0e4737", "10f067aa0ba902b8"
    with collector:
        # a local worker, started by the coordinator: one batch of the 14 sources
        env = {**otel, "TRACEPARENT": f"00-{trace_id}-{span_id}-01"}
        p = cli_process("-p", "hash-384", "ingest", "sample_corpus/support/billing", "-n", "billing_kb",
                        "--workers", "1", env=env)  # fmt: skip
        assert p.returncode == 0, p.stderr.decode()
        local = collector.spans()

        # a worker started elsewhere (no TRACEPARENT), 4 items a batch, for a coordinator without local workers
        collector.clear()
        coordinator = subprocess.Popen(
            [sys.executable, "-m", "kbctl", "-p", "hash-384", "ingest", "sample_corpus/support/technical",
             "-n", "technical_kb", "--workers", "0"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=dict(os.environ, KBCTL_HOME=str(kb_home), KBCTL_TENANT=tenant, PYTHONWARNINGS="ignore", **env),
        )  # fmt: skip
        try:
            run_id = _wait_for_run(cli, "technical_kb")
            w = cli_process("worker", "--run", str(run_id), "--batch", "4", "--poll", "0.2", env=otel)
            assert w.returncode == 0, w.stderr.decode()
            assert coordinator.wait(120) == 0, coordinator.stderr.read().decode()
        finally:
            if coordinator.poll() is None:
                coordinator.kill()
                coordinator.wait()
        remote = collector.spans()

    for spans, batch_sizes in ((local, [14]), (remote, None)):
        assert {s.trace_id.hex() for s in spans} == {trace_id}
        root = next(s for s in spans if s.name == "kbctl.ingest")
        assert root.parent_span_id.hex() == span_id
        enqueue = next(s for s in spans if s.name == "kbctl.ingest.enqueue")
        assert enqueue.parent_span_id == root.span_id
        batches = [s for s in spans if s.name == "kbctl.ingest.batch"]
        assert batches and all(b.parent_span_id == root.span_id for b in batches)
        items = sorted(attrs(b)["kbctl.items"] for b in batches)
        assert sum(items) == attrs(enqueue)["kbctl.items"]
        if batch_sizes is not None:
            assert items == batch_sizes
        else:
            assert len(batches) > 1 and max(items) == 4
        ids = {b.span_id for b in batches}
        for stage in ("fetch", "extract", "embed", "store"):
            staged = [s for s in spans if s.name == f"kbctl.ingest.{stage}"]
            assert staged and all(s.parent_span_id in ids for s in staged), stage
        for b in batches:
            a = attrs(b)
            assert a["kbctl.namespace"] in ("billing_kb", "technical_kb") and a["kbctl.settled"] == a["kbctl.items"]
            stored = [s for s in spans if s.name == "kbctl.ingest.store" and s.parent_span_id == b.span_id]
            assert sum(attrs(s)["kbctl.documents"] for s in stored) >= a["kbctl.documents.new"]
