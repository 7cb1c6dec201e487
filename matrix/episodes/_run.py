"""``Run``: one run directory, of either kind, read-only.

A run directory holds a single-turn study (each result is a job: one call,
its verdict) or a conversation study (each result is an episode: its steps,
its turn verdicts, its verdict). ``Run`` is the one record for both
(``pg.run``, ``pg.arun`` and ``pg.open_run`` return it); the kind of the
directory chooses the reads behind its methods (``running.reader`` or
``running.conversation_reader.ConversationReader``), so nothing that holds a ``Run``
asks which kind it is. ``run.kind`` says it where a caller wants to know.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - types only; the modules are imported when used
    import os

    import pandas as pd

    from promptgrid.matrix.running.findings import AdaptiveResult
    from promptgrid.matrix.running.results import AccuracyRow, ResultRow

__all__ = ["Run"]


class Run:
    """A run directory, read-only: its config, results, accuracy, counts, spend and what an adaptive goal found.

    Made by ``run``/``arun`` (``summary`` says what that invocation did: a
    ``RunSummary``, or a ``ConversationRunSummary`` for a conversation run)
    and by ``open_run`` (``summary`` is ``None``). Every read opens the store
    read-only and closes it again: no lock, nothing written, so a ``Run``
    also reads a directory another process is still writing, or a read-only
    copy of one.

    The methods mean the same for both kinds; what differs is the unit of a
    result: ``results()`` gives the ``Result`` of each job of a single-turn run and
    of each episode of a conversation run (``episodes()``, the same
    list; a ``RunError`` on a single-turn run), and ``rows()`` gives one flat
    ``ResultRow`` per result for both. ``report()`` is the kind's report;
    ``language_report()`` is a conversation run's (a single-turn run's
    per-language tables are in its report).
    """

    def __init__(self, path: str | os.PathLike[str], summary: Any = None) -> None:
        from promptgrid.matrix.running.store_episodes import is_conversation_run

        self.path = Path(path)
        self.kind: str = "conversation" if is_conversation_run(self.path) else "single"
        """The kind of study the directory holds: ``"single"`` or ``"conversation"`` (``Kind.name``;
        ``promptgrid.matrix.episodes.kind_named`` gives the ``Kind``)."""
        self._reader = _reader(self.kind, self.path)  # a RunError now if it is not a readable run directory
        self.summary = summary
        """What the invocation that made this ``Run`` did; ``None`` from ``open_run``. Single-turn: a
        ``RunSummary`` (sent, errors, spend, ``stopped`` = None | "interrupted" | "max_cost", ``halted`` =
        {model: error}); conversations: a ``ConversationRunSummary`` (episodes, finished, valid, errors,
        ``unfinished``, steps sent and read back, ``spend``, ``stopped``, ``halted``, ``not_run``)."""

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r})"

    @cached_property
    def config(self) -> dict[str, Any]:
        """The content of ``run.json``: the latest config, grid name and counts, and ``invocations``, one per
        run into this directory (each with its config, grid, dataset, models, planned and pending jobs, summary);
        ``{}`` when absent (a conversation run keeps its grid, dataset and plan in its store: ``meta()``)."""
        from promptgrid.matrix.running.session import read_run_json

        return read_run_json(self.path)

    def results(self, include_pending: bool = False) -> list[Any]:
        """One result per (model, variant, case, repeat): a ``ResultRow`` per job with a result (with
        ``include_pending``, every planned job), or a ``Result`` per stored episode (an unfinished one
        has ``valid`` ``None``; ``include_pending`` changes nothing: an episode is stored once it starts). Both
        are a ``pg.Result`` (``model``, ``variant_id``, ``case_id``, ``repeat``, ``status``, ``valid``,
        ``failure_mode``, ``error``, ``cost_usd``, ``scored``, ``correct``, ``row()``): code written against
        these reads either kind."""
        return self._reader.results(include_pending)

    def rows(self) -> list[ResultRow]:
        """One flat ``ResultRow`` per result (what ``load_results``, ``compare`` and an export for a spreadsheet
        read): a single-turn run's ``results()``; a conversation run's episodes, each as ``Result.row()``
        (its case the conversation; an unfinished one ``pending``)."""
        return self._reader.rows()

    def episodes(self, *, models: Sequence[str] | None = None) -> list[Any]:
        """A conversation run's episodes (of ``models`` when given), in (model, variant, conversation, repeat)
        order; ``RunError`` on a single-turn run (its results are jobs: ``results()``)."""
        return self._reader.episodes(models)

    def to_pandas(self, include_pending: bool = False) -> pd.DataFrame:
        """The results as a pandas DataFrame, one row per ``results()`` row (pandas is optional:
        ``MissingDependencyError`` naming the ``pandas`` extra without it).

        Single-turn: the columns are those of ``ResultRow.to_dict()`` (the ``export --jsonl`` fields, in their
        order: ``schema_version``, ``model``, ``variant_id``, ``case_id``, ``repeat``, ..., ``case_group``), so
        this is ``pd.DataFrame([r.to_dict() for r in run.results()])`` with these changes:

        - ``dimensions`` always holds ``call_mode`` (``"prompt"`` where the stored dimensions leave the
          default out), and three columns follow the fields:
        - ``category``: the case's dataset category (``case_category``: simple, multiple, parallel,
          parallel_multiple, irrelevance);
        - ``call_mode``: the variant's call mode (prompt, native, constrained);
        - ``parsed``: the answer parses as a call, as the report's "parse as calls" share counts it (no
          failed call and no format-level failure mode, ``PARSE_FAILURE_MODES``; a correct answer counts,
          a correct "no call" on an irrelevance case included); ``<NA>`` (nullable ``boolean``) for a job
          that is not scored (pending, unsupported, no verdict).

        Conversations: one row per episode, with per-turn columns (``conversations.episodes_frame``).
        An empty run gives an empty frame with these columns.
        """
        return self._reader.to_pandas(include_pending)

    def accuracy(self) -> list[AccuracyRow]:
        """Accuracy per model x variant with 95% intervals: the report's accuracy cells (empty before results);
        a conversation run's over its finished episodes (an episode is right when every turn is)."""
        return self._reader.accuracy()

    def counts(self) -> dict[str, int]:
        """What the directory holds, as ``status`` counts it. Single-turn: jobs (``jobs``, ``done``,
        ``errors``, ``pending``, ``unsupported``) and calls (``calls``, ``call_errors``, ``transient_errors``);
        the jobs of the latest invocation's plan that no model reached yet (a model stopped early) are jobs and
        pending too. Conversations: ``episodes`` (stored), ``finished``, ``valid``, ``errors``, ``unfinished``
        and ``steps`` (model answers stored)."""
        return self._reader.counts(self.config)

    def pending(self) -> int | None:
        """The results the latest run planned that are not in yet: a single-turn run's jobs without a result
        (whoever stores them: a re-run, ``status`` collecting provider batches, ``import_batch``; ``None`` when
        ``run.json`` records no plan); a conversation run's episodes stored unfinished."""
        return self._reader.pending(self.config)

    def spend(self) -> float:
        """USD recorded for every call (step) in the run directory (unknown prices count 0): what
        ``max_cost`` caps."""
        return self._reader.spend()

    def adaptive(self, *, trace: bool = True) -> dict[str, AdaptiveResult]:
        """What an adaptive run (``goal``/``budget``) found, per model: the best and worst variant, the spread,
        every variant's accuracy and the quantiles, each an ``Estimate`` that says whether it is ``measured`` or
        ``estimated``, with its interval; the calls (episodes) spent against the product; with ``trace``, the
        estimates after each round (schema: docs/adaptive.md). ``{}`` for a run of the whole product.

        Single-turn: computed once per state of the run directory (its store and ``run.json``, by size and
        modification time) and kept for the process: a second call, another ``Run`` of the same directory,
        ``report`` after ``run``, return copies of the first call's results; a call after the store changed
        computes them again. Conversations: the planner is replayed against the stored episodes."""
        return self._reader.adaptive(self.config, trace)

    def report(self, **options: Any) -> Any:
        """The kind's report of every stored result, nothing written: a single-turn run's ``ReportResult``
        (``pg.report(run, **options)``: ``baseline``), a conversation run's ``ConversationReport`` (``k``,
        ``confidence``: pass^k, per turn, failure modes, native - prompt)."""
        return self._reader.report(self, options)

    def variants(self) -> dict[str, dict[str, str]]:
        """Variant id -> its dimension values, as the run recorded them."""
        return self._reader.variants()

    def labels(self) -> dict[str, str]:
        """Variant id -> the grid's label, as the run recorded them (the report shows labels)."""
        return self._reader.labels()

    def meta(self) -> dict[str, Any]:
        """The grid, dataset and models of the latest run into the directory (``None`` where not recorded)."""
        return self._reader.meta(self.config)

    def language_report(self, *, baseline: str = "en", k: int | None = None, confidence: float = 0.95) -> Any:
        """A conversation run's ``LanguageReport`` per language (``report._conversation_languages.language_report``);
        a single-turn run's per-language tables are in its report (``report().data.languages``)."""
        return self._reader.language_report(baseline, k, confidence)


def _reader(kind: str, path: Path) -> Any:
    """The reads of a run directory of ``kind`` (``RunError`` when it is not a readable one)."""
    if kind == "conversation":
        from promptgrid.matrix.running.conversation_reader import ConversationReader

        return ConversationReader(path)
    from promptgrid.matrix.running.reader import SingleTurnReader

    return SingleTurnReader(path)
