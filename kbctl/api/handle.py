"""``kb["billing_kb"]``: a handle on one namespace, in the spirit of sqlite-utils' ``db["table"]``.

    billing = kb["billing_kb"]
    billing.ingest(["sample_corpus/support/billing"])
    billing.search("how long do refunds take", k=3)
    billing.verify().ok

Making one reads nothing (the namespace need not exist yet: ``ingest`` creates it). Each verb is
the knowledge base's, with this namespace filled in.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

if TYPE_CHECKING:
    from ..store import Namespace
    from ..types import SearchResult

__all__ = ["NamespaceHandle"]


class NamespaceHandle:
    """One namespace of a knowledge base, by name."""

    def __init__(self, kb: Any, name: str) -> None:
        self.kb, self.name = kb, name  # a KnowledgeBase (not imported: kbctl.api.kb imports this module)

    def __repr__(self) -> str:
        return f"<namespace {self.name!r} of tenant {self.kb.tenant!r}>"

    def exists(self) -> bool:
        """Whether the namespace is stored."""
        return self.name in self.kb.namespaces.names()

    def info(self) -> Namespace:
        """The namespace as stored, with its profile's pin (a ``UsageError`` when there is none)."""
        return self.kb.namespaces.get(self.name)

    def create(self, profile: str | None = None, description: str = "") -> Namespace:
        """Create it pinned to a profile (or return it, when it exists with the same pin)."""
        return self.kb.namespaces.create(self.name, profile, description)

    def bind(self, profile: str) -> Namespace:
        """Pin it to another profile (refused when it holds vectors the new profile could not search)."""
        return self.kb.namespaces.bind(self.name, profile)

    def delete(self) -> int:
        """Delete it with its documents and chunks; how many documents it held."""
        return self.kb.namespaces.delete(self.name)

    # -- writing ------------------------------------------------------------------------------------

    def ingest(self, targets: Sequence[str] | str, **options: Any):
        """``kb.ingest`` into this namespace (``targets``: files, folders, URLs or feeds)."""
        return self.kb.ingestion.ingest([targets] if isinstance(targets, str) else list(targets), self.name, **options)

    def ingest_records(self, records: Iterable[dict], **options: Any):
        """``kb.ingest_records`` into this namespace."""
        return self.kb.ingestion.ingest_records(records, self.name, **options)

    def store(self, items: Iterable[Any], **options: Any):
        """``kb.store`` of items embedded upstream into this namespace."""
        return self.kb.ingestion.store(items, self.name, **options)

    def verify(self, sample: int = 20):
        """``kb.verify``: is its store whole (``report.ok``)."""
        return self.kb.ingestion.verify(self.name, sample)

    # -- reading ------------------------------------------------------------------------------------

    def search(self, query: str, **options: Any) -> SearchResult:
        """``kb.search`` of this namespace."""
        return self.kb.searching.search(query, self.name, **options)

    def retriever(self, **defaults: Any):
        """``kb.retriever`` bound to this namespace."""
        return self.kb.searching.retriever(self.name, **defaults)

    def verify_claim(self, claim: str, **options: Any):
        """``kb.verify_claim`` over this namespace."""
        return self.kb.evidence.verify_claim(claim, self.name, **options)

    def research(self, topic: str, **options: Any):
        """``kb.research`` over this namespace."""
        return self.kb.evidence.research(topic, self.name, **options)

    def runs(self, limit: int = 20) -> list[dict]:
        """Its latest runs, newest first."""
        return self.kb.admin.runs(self.name, limit)

    def errors(self, run_id: int | None = None, limit: int = 100) -> list[dict]:
        """The items its latest runs (or run ``run_id``) recorded as failed."""
        return self.kb.admin.errors(self.name, run_id, limit)

    # -- generations and evaluation -----------------------------------------------------------------

    def generations(self) -> list[dict]:
        """Its generations: profile, storage, state, vectors and bytes on disk."""
        return self.kb.generations(self.name)

    def reembed(self, profile: str | None = None, **options: Any):
        """``kb.reembed``: build (or resume) its shadow generation."""
        return self.kb.generations.reembed(self.name, profile, **options)

    def swap(self, **options: Any) -> dict:
        """``kb.swap_generation``: make its shadow generation active."""
        return self.kb.generations.swap(self.name, **options)

    def rollback(self) -> dict:
        """``kb.rollback_generation``: make its previous generation active again."""
        return self.kb.generations.rollback(self.name)

    def drop_generation(self, state: str = "previous") -> dict:
        """``kb.drop_generation``: delete its previous (or shadow) generation."""
        return self.kb.generations.drop(self.name, state)

    def evaluate(self, dataset: str | Path, **options: Any):
        """``kb.evaluate`` of ``dataset`` on this namespace."""
        return self.kb.evals.evaluate(dataset, namespace=self.name, **options)

    def import_feedback(self, path: str | Path) -> int:
        """``kb.import_feedback``: its judged queries as a golden JSONL dataset."""
        return self.kb.agents.import_feedback(self.name, path)
