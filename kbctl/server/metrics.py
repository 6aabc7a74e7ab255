"""Prometheus metrics of a server (``/metrics``): request latency by tool, mode and strategy, errors
by class, hits withheld by the access gate, model load time, and the ingest figures of the run
ledger (read at each scrape, as ``kbctl stats`` prints them without a server).

One server process serves agents of several tenants, so every series of a call carries the
``tenant`` of the agent that made it; a request refused before it had an agent (a Host refused, a
token missing or wrong) has no tenant (``tenant=""``). ``Metrics.scrape(tenant)`` is what an
agent's scrape reads: its tenant's series and those of no activity (the model's load time, the
ledger of the server's tenant), never another tenant's calls nor the tenant-less refusals; the
operator's scrape (``[server] metrics_open``) reads the whole registry."""

from __future__ import annotations

from typing import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric

__all__ = ["Metrics"]

_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class Metrics:
    """One registry per server (tests run several in one process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.latency = Histogram(
            "kbctl_request_seconds",
            "Tool call latency",
            ["tool", "mode", "strategy", "tenant"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.errors = Counter(
            "kbctl_errors",
            "Failed tool calls and requests by error class",
            ["tool", "error", "tenant"],
            registry=self.registry,
        )
        self.withheld = Counter(
            "kbctl_hits_withheld", "Hits the access gate withheld", ["tool", "tenant"], registry=self.registry
        )
        self.http = Counter(
            "kbctl_http_requests",
            "HTTP requests by route and status",
            ["route", "status", "tenant"],
            registry=self.registry,
        )
        self.model_load = Gauge(
            "kbctl_model_load_seconds", "Query embedder load time", ["profile"], registry=self.registry
        )

    def ledger(self, read: Callable[[], dict]) -> None:
        """Export the run ledger's figures (``KnowledgeBase.stats``), read by ``read`` at each scrape."""
        self.registry.register(_Ledger(read))

    def scrape(self, tenant: str) -> _Scrape:
        """What an agent of ``tenant`` reads (``generate_latest`` of it): the series of its tenant's
        calls and those without a tenant label; no other tenant's, no refusal without a tenant."""
        return _Scrape(self.registry, tenant)


class _Scrape:
    def __init__(self, registry: CollectorRegistry, tenant: str) -> None:
        self.registry, self.tenant = registry, tenant

    def collect(self):
        for family in self.registry.collect():
            kept = Metric(family.name, family.documentation, family.type, family.unit)
            kept.samples = [s for s in family.samples if s.labels.get("tenant", self.tenant) == self.tenant]
            yield kept


class _Ledger:
    def __init__(self, read: Callable[[], dict]) -> None:
        self.read = read

    def describe(self):
        return []

    def collect(self):
        stats = self.read()
        runs = GaugeMetricFamily(
            "kbctl_ingest_runs", "Ingest runs in the ledger by status", labels=["namespace", "status"]
        )
        dead = GaugeMetricFamily(
            "kbctl_ingest_dead_runs",
            "Runs the ledger says are running whose process is gone (the namespace's next run marks them interrupted)",
            labels=["namespace"],
        )
        docs = GaugeMetricFamily("kbctl_documents", "Documents stored", labels=["namespace"])
        chunks = GaugeMetricFamily("kbctl_chunks", "Chunks stored", labels=["namespace"])
        errors = GaugeMetricFamily("kbctl_ingest_errors", "Item errors recorded in the ledger", labels=["namespace"])
        for r in stats["namespaces"]:
            for status, n in (r["runs_by_status"] or {}).items():
                runs.add_metric([r["name"], status], n)
            dead.add_metric([r["name"]], r["dead_runs"])
            docs.add_metric([r["name"]], r["documents"])
            chunks.add_metric([r["name"]], r["chunks"])
            errors.add_metric([r["name"]], r["errors"])
        yield from (runs, dead, docs, chunks, errors)
