"""``kb.generations``: a namespace's embedding generations (docs/lifecycle.md): build a shadow,
compare, swap, roll back, drop. Calling it lists them: ``kb.generations("billing_kb")``.

A build, a swap, a rollback, a drop and a side-by-side eval take SIGTERM as Ctrl-C (a ``KeyboardInterrupt``, in the main
thread while SIGTERM has its default handler): what was committed stays, and the next call goes on
from there."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..errors import CheckFailed, UsageError
from ..interrupts import sigterm_as_ctrl_c
from ._boundary import Part, psycopg_boundary

if TYPE_CHECKING:
    from ..evals import EvalDataset
    from ..ingest.reembed import BuildReport, ReembedPlan

__all__ = ["Generations"]


@psycopg_boundary
class Generations(Part):
    """The generations of the tenant's namespaces (``kbctl reembed``)."""

    def __call__(self, namespace: str) -> list[dict]:
        """A namespace's generations: profile, storage, state, vectors and bytes on disk."""
        from ..ingest import reembed as gen

        return gen.describe(self._conn(), self.kb.namespaces.get(namespace))

    @sigterm_as_ctrl_c()
    def reembed(
        self,
        namespace: str,
        profile: str | None = None,
        *,
        storage: str | None = None,
        plan: bool = False,
        batch: int = 256,
        progress: Callable[[int, int], None] | None = None,
    ) -> BuildReport | ReembedPlan:
        """Build (or resume) the shadow generation of ``profile`` stored as ``storage`` (default: the
        profile's ``storage``): every chunk gets a vector, from the embed cache or the model. Without
        ``profile``, ``storage`` asks for the namespace's own profile (the one its active generation
        serves) stored so, and neither resumes the shadow being built. ``plan``: what it would embed,
        and how long; a read, it makes no tenant (nor anything else). The namespace is looked up as
        a plan reads (``Session.planning``): a tenant never made holds none, so it is refused as one
        (``NamespaceNotFound``) and not made."""
        _check_batch(batch)
        from ..ingest import reembed as gen

        with self.session.planning():
            ns = self.kb.namespaces.get(namespace)
        if not plan:
            self.session.writing()
        conn = self._conn()
        shadow = gen.generation_of(conn, ns, "shadow")
        active = self.kb.namespaces.search_profile(ns, None)
        if profile is None and storage is None and shadow is None:
            other = "vector" if ns.storage == "halfvec" else "halfvec"
            raise UsageError(
                f"namespace {namespace!r} has no shadow generation",
                hint=f"pass --profile NAME, or --storage {other} to store its profile's vectors as {other}",
            )
        if profile:
            prof = self.settings.profile(profile)
        elif storage is not None:  # a storage change of the profile the namespace serves
            prof = active
        else:
            prof = gen.stored_profile(conn, shadow.profile_id, active)  # type: ignore[union-attr]
        store_as = storage or (shadow.storage if profile is None and shadow else prof.storage)
        if store_as not in ("vector", "halfvec"):
            raise UsageError(f"storage must be vector or halfvec, not {store_as!r}")
        from ..embed import check as check_model

        gen.check_shadow(conn, ns, prof, store_as, active)  # a refusal first: it loads nothing
        # a model that cannot load makes no shadow (its files are looked for first), and a plan
        # refuses it as the build would, rather than fail measuring its speed
        check_model(prof)
        if plan:
            return gen.plan(conn, ns, prof, store_as)
        target = gen.start_shadow(conn, ns, prof, store_as, active)
        try:
            return gen.build(conn, ns, target, prof, batch=batch, progress=progress)
        except BaseException:
            if shadow is None or shadow.id != target.id:  # made by this call: gone if still empty
                gen.discard_empty(conn, ns, target)
            raise

    @sigterm_as_ctrl_c()
    def swap(
        self,
        namespace: str,
        *,
        require: Sequence[str] = (),
        dataset: str | Path | None = None,
        limit: int | None = None,
        progress: Callable[[int, int], None] | None = None,
        profile: str | None = None,
        storage: str | None = None,
        batch: int = 256,
    ) -> dict:
        """Make the shadow generation active (one transaction, under the namespace lock). With
        ``profile`` (or ``storage``), its shadow is built (or resumed) first, as ``reembed`` does,
        and its report is the answer's ``build``. ``require`` gates (``hybrid:ndcg@10>=active``,
        ``dense:recall@10>=0.8``) are checked first on ``dataset`` side by side; one failing raises
        ``CheckFailed`` (exit 3) whose ``report`` is the answer so far (``eval`` with its ``gates``,
        ``swapped`` false), and nothing is swapped. A ``dataset`` without gates is compared all the
        same (the answer's ``eval``) before the swap. The gates and the dataset (its ``limit``) are
        read before the build: one that cannot be read cost a whole build."""
        from ..ingest import reembed as gen

        _check_batch(batch)
        if require and dataset is None:
            raise UsageError("--require needs --eval DATASET", hint="the gates compare the generations on it")
        for gate in require:  # before the build: a typo in a gate cost a whole build
            gen.read_gate(gate)
        ds = self.kb.evals.dataset(dataset, namespace=namespace, limit=limit) if dataset is not None else None
        out: dict[str, Any] = {"namespace": namespace}
        if profile is not None or storage is not None:
            out["build"] = self.reembed(namespace, profile, storage=storage, batch=batch, progress=progress).to_json()
        if ds is not None:
            side = self._side_by_side(namespace, str(dataset), ds, limit=limit, require=require)
            out["eval"] = side
            if require and side["gates"]["failures"]:
                raise CheckFailed(
                    "swap refused: " + "; ".join(side["gates"]["failures"]),
                    hint="nothing was swapped",
                    report={**out, "swapped": False},
                )
        ns = self.kb.namespaces.get(namespace)
        out.update(gen.swap(self._conn(), ns, self.kb.namespaces.search_profile(ns, None), progress=progress))
        out["swapped"] = True
        return out

    @sigterm_as_ctrl_c()
    def rollback(self, namespace: str) -> dict:
        """Make the previous generation active again (one transaction, under the namespace lock)."""
        from ..ingest import reembed as gen

        ns = self.kb.namespaces.get(namespace)
        return gen.rollback(self._conn(), ns, self.kb.namespaces.search_profile(ns, None))

    @sigterm_as_ctrl_c()
    def drop(self, namespace: str, state: str = "previous") -> dict:
        """Delete the ``previous`` generation (no rollback after it) or the ``shadow`` being built."""
        from ..ingest import reembed as gen

        ns = self.kb.namespaces.get(namespace)
        if state == "previous":
            return gen.drop_old(self._conn(), ns)
        if state == "shadow":
            return gen.drop_shadow(self._conn(), ns)
        raise UsageError(f"cannot drop the {state} generation", hint="drop previous or shadow")

    @sigterm_as_ctrl_c()
    def compare(
        self,
        namespace: str,
        dataset: str | Path,
        *,
        modes: Sequence[str] = ("lexical", "dense", "hybrid"),
        k: int = 10,
        depth: int = 100,
        split: str = "test",
        limit: int | None = None,
        require: Sequence[str] = (),
    ) -> dict:
        """The eval of ``dataset`` on the active and the shadow generation, side by side: each
        mode's metrics and latency, and each generation's size on disk. With ``require`` (the gates
        of ``swap``), ``gates``: ``{"require": [...], "failures": [...]}``, the gates that failed
        (a gate that cannot be read is refused before the eval runs)."""
        from ..ingest import reembed as gen

        for gate in require:  # refused before the eval runs, not after it
            gen.read_gate(gate)
        ds = self.kb.evals.dataset(dataset, namespace=namespace, split=split, limit=limit)
        return self._side_by_side(
            namespace, str(dataset), ds, modes=modes, k=k, depth=depth, split=split, limit=limit, require=require
        )

    def _side_by_side(
        self,
        namespace: str,
        name: str,
        ds: EvalDataset,
        *,
        modes: Sequence[str] = ("lexical", "dense", "hybrid"),
        k: int = 10,
        depth: int = 100,
        split: str = "test",
        limit: int | None = None,
        require: Sequence[str] = (),
    ) -> dict:
        """``compare`` of a dataset read already (``name``: where it was read from)."""
        from ..ingest import reembed as gen

        sides: dict[str, Any] = {}
        notes: tuple[str, ...] = ()
        gens = {g["state"]: g for g in self(namespace)}
        if "shadow" not in gens:
            raise UsageError(
                f"namespace {namespace!r} has no shadow generation to compare",
                hint=f"build one first: kbctl reembed {namespace} --profile NAME",
            )
        for state in ("active", "shadow"):
            run = self.kb.evals.evaluate(
                ds, namespace=namespace, modes=modes, k=k, depth=depth, split=split, limit=limit,
                generation=state,
            )  # fmt: skip
            notes = run.notes
            sides[state] = {
                "generation": gens[state],
                "modes": {m.mode: dict(m.metrics) for m in run.report.modes},
            }
        out = {"namespace": namespace, "dataset": name, "k": k, **sides, "notes": list(notes)}
        if require:
            out["gates"] = {"require": list(require), "failures": gen.check_gates(out, require)}
        return out


def _check_batch(batch: int) -> None:
    """``--batch`` refused before anything is made (0 built a shadow and gave it nothing)."""
    if batch < 1:
        raise UsageError(f"--batch must be at least 1, not {batch}", hint="chunks embedded and committed at a time")
