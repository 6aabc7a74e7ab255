"""``kb.evidence``: evidence for a claim (``kb.verify_claim``) and a broad look at a topic
(``kb.research``), the library side of the agent tools ``verify_claim`` and ``research_topic``.
The algorithms are in ``kbctl.search.evidence``; this part runs the searches and reads the vectors."""

from __future__ import annotations

from typing import Any, Sequence

from ..search.evidence import (
    ClaimCheck,
    Research,
    claim_similarities,
    evidence_signals,
    feedback_terms,
    group_by_document,
    key_terms,
    mmr,
)
from ..textutil.analyze import Analyzer, get_analyzer
from ..types import Principal
from ._boundary import Part, psycopg_boundary

__all__ = ["Evidence"]


@psycopg_boundary
class Evidence(Part):
    """Claims and topics over one or several namespaces, searched as ``principal``."""

    def verify_claim(
        self,
        claim: str,
        namespace: str | Sequence[str],
        *,
        k: int = 5,
        filters: Sequence[str] = (),
        principal: Principal | None = None,
        min_similarity: float | None = None,
        min_terms: float | None = None,
    ) -> ClaimCheck:
        """Look for evidence of ``claim``: its ``k`` best hybrid passages, each with signals (dense
        similarity to the claim, share of its key terms found, lane agreement); a passage
        ``supports`` it when it passes both thresholds (default: ``[server] evidence_min_similarity``
        and ``evidence_min_terms``). Absence of evidence is not evidence against the claim."""
        server = self.settings.server
        sim_min = float(server.evidence_min_similarity if min_similarity is None else min_similarity)
        terms_min = float(server.evidence_min_terms if min_terms is None else min_terms)
        result = self.kb.searching.search(
            claim, namespace, k=k, filters=filters, mode="hybrid", explain=True, principal=principal
        )
        vectors, profiles = self.kb.searching.passage_vectors_and_profiles(result.hits) if result.hits else ({}, {})
        similarity = claim_similarities(claim, result.hits, vectors, profiles)
        analyzer = self._analyzer(result.namespaces)
        terms = key_terms(claim, analyzer)
        signals = []
        for h in result.hits:
            s = evidence_signals(h, terms, analyzer, similarity.get((h.namespace, h.chunk_id)))
            s["supports"] = (s["dense_similarity"] or 0) >= sim_min and s["key_terms_found"] >= terms_min
            signals.append(s)
        thresholds = {"dense_similarity": sim_min, "key_terms_found": terms_min}
        return ClaimCheck(claim, result, terms, signals, thresholds)

    def research(
        self,
        topic: str,
        namespace: str | Sequence[str],
        *,
        budget: int = 4000,
        k: int = 20,
        principal: Principal | None = None,
        **options: Any,
    ) -> Research:
        """Explore ``topic`` broadly: a hybrid search with feedback (``k`` hits), sub-queries built from
        feedback terms of its first five hits (k=10 each), diverse passages of them all (MMR over
        their embeddings, lambda 0.7) grouped by document within ``budget`` tokens."""
        first = self.kb.searching.search(
            topic, namespace, k=k, mode="hybrid", prf="hybrid", principal=principal, **options
        )
        terms = feedback_terms(topic, first.hits[:5], self._analyzer(first.namespaces))
        subs = [f"{topic} {t}" for t in terms[:3]]
        pool = {(h.namespace, h.chunk_id): h for h in first.hits}
        more = []
        for q in subs:
            more.append(self.kb.searching.search(q, namespace, k=10, mode="hybrid", principal=principal, **options))
            for h in more[-1].hits:
                pool.setdefault((h.namespace, h.chunk_id), h)
        vectors, profiles = self.kb.searching.passage_vectors_and_profiles(list(pool.values()))
        spaces = {name: prof.fingerprint for name, prof in profiles.items()}  # namespaces of several profiles
        picked = mmr(list(pool.values()), vectors, lambda_=0.7, n=len(pool), spaces=spaces)  # the budget: how many fit
        return Research(topic, first, subs, more, terms, group_by_document(picked, budget))

    def _analyzer(self, namespaces: Sequence[str]) -> Analyzer:
        """The lexical lane's analyzer of the first namespace (its profile's language, its recorded
        analyzer version), the default profile's at the current version without one."""
        if not namespaces:
            return get_analyzer(self.settings.profile().lexical.language)
        prof = self.kb.namespaces.profile_for(namespaces[0])
        return get_analyzer(prof.lexical.language, self.kb.namespaces.get(namespaces[0]).analyzer)
