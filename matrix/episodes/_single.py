"""Single-turn episodes: a case is rendered, sent once and scored (``running/``'s runner and store).

``SINGLE`` is the ``Kind`` of ``mini``, ``bfcl:<single-turn category>`` and
``jsonl:`` files of cases (``running.reader.SingleTurnReader`` answers
``Run``'s methods for a directory such a run wrote); ``load_rows`` and
``report_rows`` are ``pg.load_results`` and ``pg.report`` of single-turn
results.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TextIO

from promptgrid.display import escape_controls
from promptgrid.errors import RunError
from promptgrid.matrix.running.store import STORE_FILE, RunStore

from ._run import Run

if TYPE_CHECKING:  # pragma: no cover - types only
    from promptgrid.matrix.report import ReportResult
    from promptgrid.matrix.running.config import RunConfig
    from promptgrid.matrix.running.estimate import PlanEstimate
    from promptgrid.matrix.running.exchange import ExportSummary, ImportSummary
    from promptgrid.matrix.running.results import ResultRow
    from promptgrid.matrix.running.runner import Runner
    from promptgrid.matrix.running.session import BatchMode, Prepared, RunStatus
    from promptgrid.variants import Grid

__all__ = ["SINGLE", "SingleTurn", "load_rows", "report_rows"]


class SingleTurn:
    """The ``Kind`` of single-turn datasets (see ``promptgrid.matrix.episodes``)."""

    name = "single"

    def __repr__(self) -> str:
        return "Kind('single')"

    def run(self, config: RunConfig, grid: Any, *, progress: bool, retry_errors: bool, append: bool,
            batch: bool, batch_wait: bool, batch_poll_s: float) -> Run:
        prep = _prepare(config, grid)
        mode = batch_mode(batch, batch_wait, batch_poll_s)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(_execute(prep, progress=progress, retry_errors=retry_errors, append=append, batch=mode))
        return _execute_on_thread(prep, progress=progress, retry_errors=retry_errors, append=append, batch=mode)

    async def arun(self, config: RunConfig, grid: Any, *, progress: bool, retry_errors: bool, append: bool,
                   batch: bool, batch_wait: bool, batch_poll_s: float) -> Run:
        prep = _prepare(config, grid)
        return await _execute(prep, progress=progress, retry_errors=retry_errors, append=append,
                              batch=batch_mode(batch, batch_wait, batch_poll_s))

    def export_batch(self, run_dir: Path, model: str, out: Any, *, grid: Any, dataset: str | None,
                     body_model: str | None, append: bool, retry_errors: bool,
                     options: Mapping[str, Any]) -> ExportSummary:
        from promptgrid.matrix.running.exchange import export_config, export_requests

        config, new_run = export_config(run_dir, model, grid=grid, dataset=dataset, **options)
        return export_requests(_prepare(config, grid), out, new_run=new_run, append=append, body_model=body_model,
                               retry_errors=retry_errors)

    def import_batch(self, run_dir: Path, results: Path) -> ImportSummary:
        from promptgrid.matrix.running.exchange import import_results

        return import_results(run_dir, results)

    def functions(self, dataset: str, bfcl_data: Any) -> list[dict[str, Any]]:
        from promptgrid.matrix.datasets import load_dataset

        return [dict(f) for case in load_dataset(dataset, bfcl_data=bfcl_data).cases for f in case.functions]

    def status(self, run_dir: Path, *, poll: bool, wait: bool, poll_s: float) -> RunStatus:
        from promptgrid.matrix.running.session import run_status, run_sync

        if not (run_dir / STORE_FILE).is_file():
            raise RunError(f"{run_dir} is not a run directory (no {STORE_FILE}). Start one with: promptgrid run ...")
        status: RunStatus = run_sync(run_status(run_dir, poll=poll, wait=wait, poll_s=poll_s), "promptgrid-status")
        return status

    def report(self, source: Any, out: Path | None, *, formats: set[str], baseline: str | None,
               episodes: Sequence[str] | None, transcripts: int | None) -> Any:
        return report_rows(source, out, formats=formats, baseline=baseline, episodes=episodes,
                           transcripts=transcripts)

    def score_file(self, source: IO[bytes], sink: IO[str], *, name: str, dataset: str, grid: str | None,
                   variant: str | None, strict_arguments: bool, bfcl_data: Any,
                   errors: IO[str]) -> tuple[int, int, int, str]:
        """Score promptgrid's or bfcl-eval's single-turn answer lines (``scoring.score_stream``)."""
        from promptgrid.errors import DatasetError, GridError, closest
        from promptgrid.matrix.datasets import load_dataset
        from promptgrid.matrix.scoring import score_stream, variant_index

        if strict_arguments:
            raise DatasetError("--strict-arguments applies to conversation datasets (bfcl:multi_turn_*, mini-mt, "
                               f"a jsonl: file of conversations) only; {dataset} is scored by comparing calls "
                               "with its possible answers.")
        cases = {c.id: c for c in load_dataset(dataset, bfcl_data=bfcl_data).cases}
        variants = variant_index(grid)
        if variant is not None and variant not in variants:
            where = f"grid {grid!r}" if grid else "the built-in grids (pass --grid for a grid of your own)"
            raise GridError(f"--variant {variant!r} is not a variant id of {where}.{closest(variant, variants)}")
        counts = score_stream(source, sink, name=name, variants=variants, cases=cases, grid=grid, errors=errors,
                              variant=variant)
        return counts.scored, counts.valid, counts.failed, ""

    def render_dataset(self, grid: Grid, dataset: str, *, variants: Sequence[str], cases: Sequence[str],
                       limit: int | None, store: str | None, bfcl_data: Any, jsonl: bool) -> Iterator[str]:
        """Each (case, variant) prompt as the run would send it: messages and what is sent beside them."""
        import json

        from promptgrid.matrix.datasets import load_dataset
        from promptgrid.matrix.running.session import make_renderer

        from ._text import message_lines, request_fields, request_summary

        labels = {v.id: v.label for v in grid}
        chosen = load_dataset(dataset, bfcl_data=bfcl_data).select(case_ids=list(cases) or None, limit=limit)
        selected = grid.select(list(variants))
        renderer = make_renderer(selected, template_dir=grid.template_dir, translation_store=store,
                                 bfcl_data=bfcl_data)
        # Case-major: a case's function docs are rendered once per doc format and reused by its variants.
        for prompt in (renderer.render(variant, case) for case in chosen for variant in selected):
            if jsonl:
                yield json.dumps({"variant_id": prompt.variant_id, "case_id": prompt.case_id,
                                  "label": labels[prompt.variant_id], "messages": list(prompt.messages),
                                  **request_fields(prompt.request), "sha256": prompt.sha256},
                                 ensure_ascii=False) + "\n"
            else:
                yield (f"=== {prompt.case_id} | {labels[prompt.variant_id]} | {prompt.variant_id}\n"
                       + message_lines(prompt.messages) + escape_controls(request_summary(prompt.request)) + "\n")

    def render_run(self, run_dir: Path, *, models: Sequence[str], variants: Sequence[str], cases: Sequence[str],
                   repeats: Sequence[int], limit: int | None, dataset: str | None, bfcl_data: Any,
                   jsonl: bool) -> Iterator[str]:
        """The chosen jobs of a run as they happened: the prompt rebuilt from the run's grid and dataset (nothing
        is sent), the stored answer (or the call's error) and its verdict."""
        import json

        from promptgrid.matrix.datasets import load_dataset
        from promptgrid.matrix.report._episode_export import select_episodes
        from promptgrid.matrix.running.reader import SingleTurnReader
        from promptgrid.matrix.running.session import make_renderer, read_run_json
        from promptgrid.variants import load_grid

        from ._text import message_lines, request_fields, request_summary

        reader = SingleTurnReader(run_dir)
        rows = reader.results(False)
        if not rows:
            return
        chosen = select_episodes(rows, models=models, variants=variants, cases=cases, repeats=repeats,
                                 labels={r.variant_id: r.label for r in rows}, limit=limit, case_noun="case")
        recorded = read_run_json(run_dir).get("config") or {}
        grid_ref, dataset = recorded.get("grid"), dataset or recorded.get("dataset")
        if not grid_ref or not dataset:
            raise RunError(f"{run_dir}/run.json does not say which grid and dataset the run used, so its prompts "
                           "cannot be rebuilt; promptgrid export RUN_DIR writes its answers.")
        grid = load_grid(grid_ref)
        by_id = {v.id: v for v in grid}
        gone = sorted({r.variant_id for r in chosen} - set(by_id))
        if gone:
            raise RunError(f"the run's grid {grid_ref} has no variant {gone[0]!r} now, so its prompts cannot be "
                           "rebuilt; promptgrid export RUN_DIR writes the run's answers.")
        data = bfcl_data or recorded.get("bfcl_data")
        case_of = {c.id: c for c in load_dataset(dataset, bfcl_data=data).select(
            case_ids=sorted({r.case_id for r in chosen}))}
        renderer = make_renderer([by_id[vid] for vid in sorted({r.variant_id for r in chosen})],
                                 template_dir=grid.template_dir, translation_store=recorded.get("translation_store"),
                                 bfcl_data=data)
        for r in chosen:
            prompt = renderer.render(by_id[r.variant_id], case_of[r.case_id])
            if jsonl:
                yield json.dumps({"variant_id": r.variant_id, "case_id": r.case_id, "label": r.label,
                                  "trajectory": "run", "model": r.model, "repeat": r.repeat, "valid": r.valid,
                                  "failure_mode": r.failure_mode, "messages": list(prompt.messages),
                                  **request_fields(prompt.request), "response": r.response, "status": r.status,
                                  "error": r.error}, ensure_ascii=False) + "\n"
                continue
            verdict = {True: "valid", False: "not valid"}.get(r.valid, r.status)
            answer = r.response if r.status == "done" else f"({r.status}: {r.error})"
            why = f": {r.failure_mode} ({r.message})" if r.valid is False and r.failure_mode else ""
            yield (f"=== {r.case_id} | {r.model} | {r.label} | {r.variant_id} | repeat {r.repeat} | {verdict}\n"
                   + message_lines(prompt.messages) + escape_controls(request_summary(prompt.request))
                   + f"--- answer\n{escape_controls(answer or '')}\n--- verdict: {verdict}{escape_controls(why)}\n\n")

    def rescore(self, run_dir: Path) -> dict[str, int]:
        from promptgrid.matrix.running.session import rescore

        return rescore(run_dir)

    def print_rescore(self, run_dir: Path, stats: dict[str, int], out: TextIO, err: TextIO) -> int:
        from promptgrid.matrix.running.describe import print_rescore

        return print_rescore(run_dir, stats, out, err)

    def estimate(self, config: RunConfig, *, append: bool) -> PlanEstimate:
        from promptgrid.matrix.running.describe import estimate_config

        return estimate_config(config, append=append)

    def dry_run(self, config: RunConfig, *, append: bool, out: TextIO) -> None:
        from promptgrid.matrix.running.describe import dry_run

        dry_run(config, append=append, out=out)

    def print_run(self, run: Run, out: TextIO, err: TextIO) -> int:
        from promptgrid.matrix.running.describe import print_run

        return print_run(run, out, err)

    def export_lines(self, run_dir: Path) -> tuple[Iterator[str], Path, str]:
        import json

        with RunStore(run_dir, readonly=True):  # a RunError before anything is written
            pass

        def lines() -> Iterator[str]:
            dumps = json.dumps
            with RunStore(run_dir, readonly=True) as store:
                for row in store.rows():
                    yield dumps(row.to_dict(), ensure_ascii=False) + "\n"

        return lines(), run_dir / STORE_FILE, "jobs"


SINGLE = SingleTurn()


def load_rows(source: Run | Path) -> list[ResultRow]:
    """``pg.load_results``: the rows of a ``Run``, a run directory or a JSONL export (``ReportError`` naming what to
    give instead); a conversation run gives one row per episode (``Run.rows``)."""
    from promptgrid.errors import ReportError
    from promptgrid.matrix.running.results import read_results

    if isinstance(source, Run):
        return source.rows()
    p = source
    if p.is_file():
        if p.suffix in (".jsonl", ".json", ".ndjson"):
            return read_results(p)
        raise ReportError(f"{p} is a file but not a JSONL export; give a run directory or a file from "
                          "promptgrid export.")
    if not p.is_dir():
        raise ReportError(f"{p} does not exist; give a run directory (promptgrid run --run-dir DIR) or a JSONL "
                          "export.")
    if not (p / STORE_FILE).is_file():
        from promptgrid.matrix.running.store_episodes import is_conversation_run

        if is_conversation_run(p):
            return Run(p).rows()  # its episodes, one flat row each
        raise ReportError(f"{p} has no {STORE_FILE}: it is not a run directory. Give the directory a run wrote "
                          "(promptgrid run --run-dir DIR) or a JSONL export (promptgrid export DIR --output FILE).")
    return Run(p).results()


def report_rows(source: Run | str | os.PathLike[str] | Iterable[ResultRow | Mapping[str, Any]], out: Path | None, *,
                formats: set[str], baseline: str | None, episodes: Sequence[str] | None = None,
                transcripts: int | None = None) -> ReportResult:
    """``report`` of single-turn results: a ``Run``, a run directory, a JSONL export or rows."""
    from promptgrid.errors import ReportError
    from promptgrid.matrix.report import PendingJobs, build_report

    if episodes or transcripts is not None:
        raise ReportError("episodes and transcripts choose the transcripts of a conversation run's "
                          "conversations.html (--episode, --transcripts); this is a single-turn run.")
    pending = None
    adaptive: list[dict[str, Any]] = []
    rows: Iterable[ResultRow | Mapping[str, Any]]
    if isinstance(source, (Run, str, os.PathLike)):
        rows = load_rows(source if isinstance(source, Run) else Path(source))
        if isinstance(source, Run) or Path(source).is_dir():
            the_run = source if isinstance(source, Run) else Run(source)
            pending = PendingJobs.from_run_record(the_run.config, the_run.pending())
            adaptive = [r.to_dict() for r in the_run.adaptive().values()]
    else:
        rows = source
    return build_report(rows, out, baseline=baseline, formats=formats, pending=pending, adaptive=adaptive)


def _prepare(config: RunConfig, grid: Any) -> Prepared:
    from promptgrid.matrix.running.session import prepare
    from promptgrid.variants import Grid

    return prepare(config, grid=grid if isinstance(grid, Grid) else None)


def batch_mode(batch: bool, wait: bool, poll_s: float) -> BatchMode | None:
    """``run``'s batch arguments as the session's ``BatchMode`` (``None``: online); ``RunError`` for a poll
    interval that is not a positive number of seconds."""
    from promptgrid.matrix.running.session import BatchMode

    if not batch:
        return None
    if isinstance(poll_s, bool) or not isinstance(poll_s, (int, float)) or not poll_s > 0 or poll_s == float("inf"):
        raise RunError(f"batch_poll_s must be a positive number of seconds, got {poll_s!r}.")
    return BatchMode(wait=bool(wait), poll_s=float(poll_s))


async def _execute(prep: Prepared, *, progress: bool, retry_errors: bool, append: bool,
                   started: Callable[[Runner], None] | None = None, batch: BatchMode | None = None) -> Run:
    from promptgrid.matrix.running.session import execute

    summary = await execute(prep, progress=progress, retry_errors=retry_errors, started=started, append=append,
                            batch=batch)
    return Run(prep.config.run_dir, summary=summary)


def _execute_on_thread(prep: Prepared, *, progress: bool, retry_errors: bool, append: bool,
                       batch: BatchMode | None = None) -> Run:
    from promptgrid.matrix.running.signals import Stopper

    stopper = Stopper()

    def started(runner: Runner) -> None:
        stopper.started(lambda: runner.stop("interrupted"))

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="promptgrid-run") as pool:
        future = pool.submit(lambda: asyncio.run(_execute(prep, progress=progress, retry_errors=retry_errors,
                                                          append=append, started=started, batch=batch)))
        try:
            return future.result()
        except KeyboardInterrupt:
            stopper.interrupt()
            return future.result()
