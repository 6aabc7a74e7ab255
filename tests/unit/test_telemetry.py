"""``kbctl.telemetry`` without a database: when traces are on, the off path, the caller's context."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kbctl import telemetry
from kbctl.config.sections import TelemetrySettings
from kbctl.errors import ConfigError
from tests.conftest import ROOT


def _section(**kw) -> TelemetrySettings:
    base = dict(enabled=False, exporter="otlp", endpoint="", service_name="", record_query=False)
    return TelemetrySettings(**{**base, **kw})


@pytest.mark.parametrize(
    "enabled, env, on, exporter",
    [
        (False, {}, False, "otlp"),
        (True, {}, True, "otlp"),
        (False, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True, "otlp"),
        (False, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, True, "otlp"),
        (False, {"OTEL_TRACES_EXPORTER": "console"}, True, "console"),
        (False, {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, False, "otlp"),
        (True, {"OTEL_TRACES_EXPORTER": "none"}, True, "otlp"),
        (True, {"OTEL_SDK_DISABLED": "true"}, False, ""),
        (False, {"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"}, False, ""),
    ],
)
def test_when_traces_are_on(enabled, env, on, exporter):
    assert telemetry._wanted(_section(enabled=enabled), env) == (on, exporter)


def test_an_unsupported_exporter_is_a_warning_in_the_environment_and_an_error_in_the_config(caplog):
    with caplog.at_level("WARNING"):
        assert telemetry._wanted(_section(), {"OTEL_TRACES_EXPORTER": "zipkin"}) == (False, "otlp")
        assert telemetry._wanted(_section(enabled=True), {"OTEL_TRACES_EXPORTER": "zipkin"}) == (True, "otlp")
    from kbctl.config import load_settings

    with pytest.raises(ConfigError, match="telemetry.exporter"):
        load_settings(overrides={"telemetry.exporter": "zipkin"})


def test_off_spans_are_one_shared_object_that_does_nothing():
    telemetry.reset()
    with telemetry.span("kbctl.search", {"kbctl.k": 10}, root=True) as s:
        s.set_attribute("kbctl.hits", 3)
        s.set_attributes({"kbctl.withheld": 0})
    assert s is telemetry.OFF and not s.is_recording()

    def fn(x):
        return x + 1

    assert telemetry.bound(fn) is fn
    assert telemetry.query_attributes("secret question") == {}
    with telemetry.continued("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"), telemetry.holding():
        telemetry.after("kbctl.search.render")


def test_a_traceparent_is_read_and_a_malformed_one_ignored():
    pytest.importorskip("opentelemetry.trace")
    ctx = telemetry._extracted(b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    from opentelemetry import trace

    sc = trace.get_current_span(ctx).get_span_context()
    assert sc.trace_id == 0x0AF7651916CD43DD8448EB211C80319C and sc.span_id == 0xB7AD6B7169203331 and sc.is_remote
    for bad in ("", "nonsense", "00-00000000000000000000000000000000-b7ad6b7169203331-01", None):
        assert telemetry._extracted(bad) is None


def test_importing_kbctl_telemetry_does_not_import_opentelemetry():
    code = "import sys, kbctl.telemetry, kbctl.api, kbctl.search.engine; print('opentelemetry' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


def test_a_forwarded_search_carries_the_callers_traceparent(monkeypatch):
    from kbctl.server.client import _trace

    monkeypatch.delenv("TRACEPARENT", raising=False)
    monkeypatch.delenv("TRACESTATE", raising=False)
    assert _trace() == {}
    monkeypatch.setenv("TRACEPARENT", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    assert _trace() == {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
