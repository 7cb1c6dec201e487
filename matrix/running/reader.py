"""A single-turn run directory, read: what ``Run``'s methods give for one (``SingleTurnReader``).

Each read opens the store read-only and closes it again (no lock, nothing written), so a directory another
process is writing, or a read-only copy, is read as it is. ``results_frame`` is ``Run.to_pandas``'s frame.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from promptgrid.errors import MissingDependencyError, RunError

from .results import ROW_FIELDS, AccuracyRow, ResultRow
from .store import RunStore

if TYPE_CHECKING:  # pragma: no cover - types only
    import pandas as pd

    from .findings import AdaptiveResult

__all__ = ["FRAME_EXTRA_COLUMNS", "SingleTurnReader", "results_frame"]


class SingleTurnReader:
    """``Run``'s reads of a single-turn run directory: each opens the store read-only and closes it again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with RunStore(self.path, readonly=True):  # a RunError now if it is not a readable run directory
            pass

    def results(self, include_pending: bool) -> list[ResultRow]:
        with RunStore(self.path, readonly=True) as store:
            return list(store.rows(include_pending=include_pending))

    def rows(self) -> list[ResultRow]:
        return self.results(False)

    def episodes(self, models: Sequence[str] | None) -> list[Any]:
        raise RunError(f"{self.path} holds a single-turn run: its results are jobs (Run.results()), not episodes.")

    def to_pandas(self, include_pending: bool) -> pd.DataFrame:
        return results_frame(self.results(include_pending))

    def accuracy(self) -> list[AccuracyRow]:
        from promptgrid.matrix.report import aggregate

        rows = self.results(False)
        if not rows:
            return []
        return [AccuracyRow(c.model, c.variant_id, c.label, c.n, c.correct, c.accuracy, c.ci[0], c.ci[1])
                for c in aggregate(rows).cells]

    def counts(self, config: Mapping[str, Any]) -> dict[str, int]:
        from promptgrid.matrix.running.session import Plan, last_invocation, model_counts

        plan = Plan.of(last_invocation(config))
        with RunStore(self.path, readonly=True) as store:
            counts = store.counts()
            unreached = sum(row[1] for row in model_counts(store, plan)) - counts["jobs"]
        counts["jobs"] += unreached
        counts["pending"] += unreached
        return counts

    def pending(self, config: Mapping[str, Any]) -> int | None:
        from promptgrid.matrix.running.session import Plan, last_invocation, plan_status

        plan = Plan.of(last_invocation(config))
        if plan is None:
            return None
        with RunStore(self.path, readonly=True) as store:
            return sum(p for _jobs, p in plan_status(store, plan).values())

    def spend(self) -> float:
        with RunStore(self.path, readonly=True) as store:
            return store.spend()

    def adaptive(self, config: Mapping[str, Any], trace: bool) -> dict[str, AdaptiveResult]:
        from promptgrid.matrix.running.findings import cached_findings, run_findings

        def compute(with_trace: bool) -> dict[str, AdaptiveResult]:
            with RunStore(self.path, readonly=True) as store:
                return run_findings(config, store, trace=with_trace)

        return copy.deepcopy(cached_findings(self.path, trace, compute))

    def report(self, run: Any, options: Mapping[str, Any]) -> Any:
        """The ``ReportResult`` of the run's rows, nothing written (``options``: ``baseline``); ``run`` is the
        ``Run`` (its pending jobs and adaptive findings go in the report)."""
        from promptgrid.matrix.report import PendingJobs, build_report

        return build_report(run.results(), None, formats=set(), pending=PendingJobs.from_run_record(
            run.config, run.pending()), adaptive=[r.to_dict() for r in run.adaptive().values()],
            **{"baseline": None, **options})

    def variants(self) -> dict[str, dict[str, str]]:
        return {r.variant_id: {k: str(v) for k, v in r.dimensions.items()} for r in self.results(True)}

    def labels(self) -> dict[str, str]:
        return {r.variant_id: r.label for r in self.results(True)}

    def meta(self, config: Mapping[str, Any]) -> dict[str, Any]:
        recorded = config.get("config") or {}
        return {"grid": config.get("grid_name") or recorded.get("grid"), "dataset": recorded.get("dataset"),
                "models": [m.get("name") for m in recorded.get("models") or () if isinstance(m, Mapping)] or None}

    def language_report(self, baseline: str, k: int | None, confidence: float) -> Any:
        raise RunError(f"{self.path} holds a single-turn run: its per-language tables are in its report "
                       "(Run.report().data, promptgrid report RUN_DIR).")


FRAME_EXTRA_COLUMNS = ("category", "call_mode", "parsed")
"""The columns ``Run.to_pandas`` adds after the ``ResultRow`` fields."""


def results_frame(rows: Iterable[ResultRow]) -> pd.DataFrame:
    """``rows`` as the DataFrame ``Run.to_pandas`` returns (see there); ``MissingDependencyError`` without pandas."""
    try:
        import pandas as pd
    except ImportError:
        raise MissingDependencyError("Run.to_pandas() (results as a pandas DataFrame)",
                                     "pip install 'promptgrid[pandas]' (or pip install pandas)") from None
    from promptgrid.matrix.report._call_modes import call_mode_of, parses_as_call

    records = []
    for r in rows:
        d = r.to_dict()
        mode = call_mode_of(d["dimensions"])
        d["dimensions"]["call_mode"] = mode
        d["category"] = r.case_category
        d["call_mode"] = mode
        d["parsed"] = parses_as_call(r) if r.scored else None
        records.append(d)
    columns = ["schema_version", *ROW_FIELDS, *FRAME_EXTRA_COLUMNS]
    frame = pd.DataFrame.from_records(records, columns=columns)
    frame["parsed"] = frame["parsed"].astype("boolean")
    return frame
