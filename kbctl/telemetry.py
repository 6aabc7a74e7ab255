"""OpenTelemetry traces of kbctl: the tracer, its configuration, and the caller's trace context.

Off by default, and then free: ``span()`` returns one shared object that does nothing, and
``opentelemetry`` is not even imported (its import alone costs ~28 ms, which ``kbctl --help`` and a
cold ``kbctl search`` do not pay). ``configure`` turns it on from ``[telemetry]`` or the standard
``OTEL_*`` variables (``OTEL_TRACES_EXPORTER``, ``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``; ``OTEL_SDK_DISABLED=true`` keeps it off): spans then go
to an OTLP/HTTP exporter (the extra ``kbctl[otel]``: opentelemetry-sdk and
opentelemetry-exporter-otlp-proto-http). A process that has set an SDK tracer provider already
(an application embedding kbctl, a test's in-memory collector) keeps it: kbctl's spans join it.

The span names and attributes are a small stable convention (docs/telemetry.md): ``kbctl.ingest``
and its stages per batch, ``kbctl.search`` and its lanes, fusion, feedback, gate and page,
``kbctl.request`` and ``kbctl.tool`` at the server. The query text is never an attribute unless
``[telemetry] record_query`` (``query_attributes``).

A caller's trace continues into kbctl: ``continued(traceparent)`` at the server's edge (the HTTP
``traceparent`` header; the MCP SDK reads ``_meta.traceparent`` of a request itself), and a root
span (``span(..., root=True)``) of a process without a current span takes the ``TRACEPARENT``
environment variable as its parent (``kbctl ingest`` in a CI job). Work handed to another thread
takes the context along (``bound``); work handed to another process, the current span's
``traceparent()``.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from ._version import __version__
from .errors import ConfigError

if TYPE_CHECKING:
    from .config.sections import TelemetrySettings

__all__ = [
    "configure",
    "enabled",
    "reset",
    "span",
    "continued",
    "traceparent",
    "bound",
    "query_attributes",
    "after",
    "holding",
    "OFF",
]

log = logging.getLogger(__name__)

EXPORTERS = ("otlp", "console")
_TRUE = ("true", "1", "yes", "on")


class _Off:
    """The span of telemetry that is off: every method does nothing (one shared instance)."""

    __slots__ = ()

    def __enter__(self) -> _Off:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def set_attribute(self, key: str, value: Any) -> None:
        pass

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        pass

    def is_recording(self) -> bool:
        return False


OFF = _Off()


class _State:
    on = False
    tracer: Any = None
    provider: Any = None  # the SDK tracer provider spans go to (ours or the process's)
    record_query = False
    warned = False
    api: Any = None  # opentelemetry.trace, once on
    context: Any = None  # opentelemetry.context, once on


_S = _State()
_TAIL: contextvars.ContextVar[list | None] = contextvars.ContextVar("kbctl_telemetry_tail", default=None)


def enabled() -> bool:
    """Whether kbctl records spans in this process."""
    return _S.on


def configure(section: TelemetrySettings, env: Mapping[str, str] | None = None) -> None:
    """Turn traces on or off for this process from ``[telemetry]`` and the ``OTEL_*`` variables.

    On: the first call sets up the SDK (an exporter, a batch processor, the global tracer provider,
    so the MCP SDK's own spans join the same trace) unless the process has an SDK provider already.
    Later calls only switch recording and ``record_query``. ``[telemetry] enabled`` without the SDK
    installed is a configuration error; ``OTEL_*`` variables without it, or naming an exporter
    kbctl does not have, are a warning (they may be meant for other programs).
    """
    env = os.environ if env is None else env
    wanted, exporter = _wanted(section, env)
    _S.record_query = section.record_query
    if not wanted:
        _S.on = False
        return
    if _S.provider is None:
        try:
            _S.provider = _provider(section, exporter)
        except ImportError:
            if section.enabled:
                raise ConfigError(
                    "[telemetry] enabled needs the OpenTelemetry SDK", hint="pip install 'kbctl[otel]'"
                ) from None
            _warn_once("OTEL_* variables ask for traces but the OpenTelemetry SDK is not installed: kbctl[otel]")
            _S.on = False
            return
        _S.tracer = _S.provider.get_tracer("kbctl", __version__)
        from opentelemetry import context, trace

        _S.api, _S.context = trace, context
    _S.on = True


def reset() -> None:
    """Stop recording (the provider stays: a process has one). For tests."""
    _S.on = False
    _S.record_query = False


def _warn_once(message: str) -> None:
    if not _S.warned:
        log.warning(message)
        _S.warned = True


def _wanted(section: TelemetrySettings, env: Mapping[str, str]) -> tuple[bool, str]:
    """(whether traces are on, the exporter's name)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() in _TRUE:
        return False, ""
    named = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    exporter = section.exporter
    by_env = False
    if named and named != "none":
        first = named.split(",")[0].strip()
        if first not in EXPORTERS:  # a variable meant for other programs must not stop kbctl: warned, ignored
            _warn_once(f"OTEL_TRACES_EXPORTER={named!r}: kbctl exports with otlp or console only; ignored")
            return section.enabled, exporter
        exporter, by_env = first, True
    if named != "none" and (env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")):
        by_env = True
    return section.enabled or by_env, exporter


def _provider(section: TelemetrySettings, exporter: str) -> Any:
    """The process's SDK tracer provider: the one set already, else a new one exporting to ``exporter``."""
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    attributes = {"service.version": __version__}
    if section.service_name:
        attributes["service.name"] = section.service_name
    elif not os.environ.get("OTEL_SERVICE_NAME"):
        attributes["service.name"] = "kbctl"
    provider = TracerProvider(resource=Resource.create(attributes))  # sampler: OTEL_TRACES_SAMPLER, else always
    if exporter == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        # endpoint None: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces,
        # else http://localhost:4318/v1/traces; headers and timeout from OTEL_EXPORTER_OTLP_* too
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=section.endpoint or None)))
    trace.set_tracer_provider(provider)  # flushed at exit (the provider's atexit shutdown)
    return provider


def span(name: str, attributes: Mapping[str, Any] | None = None, *, root: bool = False, kind: str = "internal"):
    """A context manager: span ``name`` as the current span (``OFF`` when telemetry is off).

    ``root``: a span that starts a unit of work (``kbctl.ingest``, ``kbctl.search``); without a
    current span, its parent is the ``TRACEPARENT`` environment variable, when set. ``kind``:
    ``internal`` or ``server``.
    """
    if not _S.on:
        return OFF
    return _started(name, attributes, root, kind)


def _started(name: str, attributes: Mapping[str, Any] | None, root: bool, kind: str) -> _Current:
    trace = _S.api
    context = None
    if root and not trace.get_current_span().get_span_context().is_valid:
        context = _extracted(os.environ.get("TRACEPARENT"), os.environ.get("TRACESTATE"))
    s = _S.tracer.start_span(
        name,
        context=context,
        kind=trace.SpanKind.SERVER if kind == "server" else trace.SpanKind.INTERNAL,
        attributes=attributes or None,  # copied by the SDK
    )
    return _Current(s)


class _Current:
    """A started span made current for a ``with`` block, then ended: what the SDK's
    ``start_as_current_span`` does (an exception is recorded on the span and sets its status to
    ERROR), as one small object instead of three generator context managers (docs/telemetry.md,
    Overhead)."""

    __slots__ = ("span", "token")

    def __init__(self, span: Any) -> None:
        self.span = span
        self.token: Any = None

    def __enter__(self) -> Any:
        self.token = _S.context.attach(_S.api.set_span_in_context(self.span))
        return self.span

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        _S.context.detach(self.token)
        if isinstance(exc, Exception) and self.span.is_recording():
            from opentelemetry.trace import Status, StatusCode

            self.span.record_exception(exc)
            self.span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        self.span.end()


def _extracted(traceparent: str | bytes | None, tracestate: str | bytes | None = None) -> Any:
    """The OpenTelemetry context of a W3C ``traceparent`` (and ``tracestate``), or ``None`` when
    absent or malformed."""
    if not traceparent:
        return None
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    def text(v: str | bytes) -> str:
        return v.decode("latin-1") if isinstance(v, bytes) else v

    carrier = {"traceparent": text(traceparent)}
    if tracestate:
        carrier["tracestate"] = text(tracestate)
    ctx = TraceContextTextMapPropagator().extract(carrier)
    return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None


@contextlib.contextmanager
def continued(traceparent: str | bytes | None, tracestate: str | bytes | None = None) -> Iterator[None]:
    """The block runs in the caller's trace (a W3C ``traceparent``, e.g. a request's header): spans
    started in it are children of the caller's span. Nothing happens when telemetry is off or the
    value is absent or malformed."""
    ctx = _extracted(traceparent, tracestate) if _S.on else None
    if ctx is None:
        yield
        return
    from opentelemetry import context

    token = context.attach(ctx)
    try:
        yield
    finally:
        context.detach(token)


def traceparent() -> str | None:
    """The W3C ``traceparent`` of the current span, for work that continues in another process (an
    ingest's workers: stored with the run, and ``TRACEPARENT`` of the local ones); ``None`` when
    telemetry is off or no span is current."""
    if not _S.on:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier.get("traceparent")


def bound(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` to run on another thread in the current context, so its spans are children of the
    current span (``fn`` itself when telemetry is off). Each returned callable runs once."""
    if not _S.on:
        return fn
    ctx = contextvars.copy_context()
    return lambda *args, **kwargs: ctx.run(fn, *args, **kwargs)


def query_attributes(query: str) -> dict[str, Any]:
    """The attributes of a query: its length, and its text only when ``[telemetry] record_query``."""
    if not _S.on:
        return {}
    out: dict[str, Any] = {"kbctl.query.chars": len(query)}
    if _S.record_query:
        out["kbctl.query"] = query
    return out


@contextlib.contextmanager
def holding() -> Iterator[None]:
    """The block ends the spans ``after`` starts in it (the server's tool call: ``kbctl.search.render``)."""
    if not _S.on:
        yield
        return
    tail: list = []
    token = _TAIL.set(tail)
    try:
        yield
    finally:
        _TAIL.reset(token)
        for s in tail:
            s.end()


def after(name: str, attributes: Mapping[str, Any] | None = None) -> None:
    """Start span ``name`` now, as a child of the current span, to last until the enclosing
    ``holding`` block ends or ``after`` is called again in it (what follows a search in a tool:
    rendering its answer). Outside a ``holding`` block, or with telemetry off, nothing."""
    tail = _TAIL.get()
    if tail is None or not _S.on:
        return
    for s in tail:
        s.end()
    tail.clear()
    tail.append(_S.tracer.start_span(name, attributes=dict(attributes) if attributes else None))
