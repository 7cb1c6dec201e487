"""Conversation episodes: user turns and model steps against an environment, scored turn by turn.

``CONVERSATION`` is the ``Kind`` of ``bfcl:multi_turn_*``, ``mini-mt`` and
``jsonl:`` files of conversations; it runs them with ``running.conversation_runner``
and reads their run directories with ``running.conversation_reader.ConversationReader``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TextIO

from promptgrid.errors import RunError

if TYPE_CHECKING:  # pragma: no cover - types only
    from promptgrid.matrix.running.config import RunConfig
    from promptgrid.matrix.running.estimate import PlanEstimate
    from promptgrid.matrix.running.exchange import ExportSummary, ImportSummary
    from promptgrid.matrix.running.session import RunStatus
    from promptgrid.variants import Grid

    from ._run import Run

__all__ = ["CONVERSATION", "Conversations"]


class Conversations:
    """The ``Kind`` of conversation datasets (see ``promptgrid.matrix.episodes``)."""

    name = "conversation"

    def __repr__(self) -> str:
        return "Kind('conversation')"

    def run(self, config: RunConfig, grid: Any, *, progress: bool, retry_errors: bool, append: bool,
            batch: bool, batch_wait: bool, batch_poll_s: float) -> Run:
        """In a new event loop, or, where one is running already (Jupyter), in a new loop on a worker thread,
        waited for; Ctrl-C while waiting stops the run there as a signal would (``signals.Stopper``: the episodes
        under way are left unfinished, every answer received is stored) and the ``Run`` is returned, its
        ``summary.stopped`` ``"interrupted"``, as a single-turn run's. ``retry_errors`` plays again the episodes a
        step's error ended (stored as errors, counted as failed, as a single-turn call's); ``append`` changes
        nothing: a conversation run directory keeps every variant's episodes."""
        _batch_mode(batch, batch_wait)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            start = _starter(config, grid, batch=batch, batch_poll_s=batch_poll_s, progress=progress,
                             retry_errors=retry_errors)
            result: Run = asyncio.run(start())
            return result
        from promptgrid.matrix.running.signals import Stopper

        stopper = Stopper()
        start = _starter(config, grid, batch=batch, batch_poll_s=batch_poll_s, progress=progress,
                         started=stopper.started, retry_errors=retry_errors)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="promptgrid-run") as pool:
            future = pool.submit(asyncio.run, start())
            try:
                return future.result()
            except KeyboardInterrupt:
                stopper.interrupt()
                return future.result()

    async def arun(self, config: RunConfig, grid: Any, *, progress: bool, retry_errors: bool, append: bool,
                   batch: bool, batch_wait: bool, batch_poll_s: float) -> Run:
        _batch_mode(batch, batch_wait)
        result: Run = await _starter(config, grid, batch=batch, batch_poll_s=batch_poll_s, progress=progress,
                                     retry_errors=retry_errors)()
        return result

    def export_batch(self, run_dir: Path, model: str, out: Any, *, grid: Any, dataset: str | None,
                     body_model: str | None, append: bool, retry_errors: bool,
                     options: Mapping[str, Any]) -> ExportSummary:
        """The next round (``running.conversation_reader.export_conversation_round``). With ``grid`` (and
        ``dataset``): the config these options make, as ``promptgrid run`` makes it; it is recorded in the store (meta
        ``export_config``), so a later round without ``grid`` and ``dataset`` exports from the same grid, dataset
        and selection (``options`` override the recorded values, as for a single-turn run's ``run.json``)."""
        from promptgrid.matrix.running.conversation_reader import export_conversation_round
        from promptgrid.matrix.running.exchange import config_of_record
        from promptgrid.matrix.running.session import build_config
        from promptgrid.matrix.running.store import conversation_store
        from promptgrid.matrix.running.store_episodes import CONVERSATION_STORE
        from promptgrid.variants import Grid

        if grid is None:
            if dataset is not None:
                raise RunError("--dataset needs --grid: the run directory's own grid and dataset are used otherwise.")
            record = None
            if (run_dir / CONVERSATION_STORE).is_file():
                with conversation_store(run_dir) as store:
                    record = store.meta("export_config")
            if not isinstance(record, Mapping):
                raise RunError(f"{run_dir} holds a conversation run that no export-batch with --grid started, so the "
                               "next round's grid and dataset are not known: give --grid GRID --dataset DS (and the "
                               "run's selection options, --limit, --variant, ...) as the run was given them.")
            recorded = config_of_record(record, run_dir, CONVERSATION_STORE)
            spec = next((m for m in recorded.models if m.name == model), None)
            config = build_config(recorded, models=[spec or model], run_dir=os.fspath(run_dir), **options)
        else:
            config = build_config(grid, dataset, models=[model], run_dir=os.fspath(run_dir), **options)
        summary: ExportSummary = export_conversation_round(config, out, body_model=body_model,
                                                           grid=grid if isinstance(grid, Grid) else None,
                                                           retry_errors=retry_errors)
        if (run_dir / CONVERSATION_STORE).is_file():  # the round ran: its config is the next round's default
            with conversation_store(run_dir, readonly=False) as store:
                store.set_meta("export_config", config.to_dict())
        return summary

    def import_batch(self, run_dir: Path, results: Path) -> ImportSummary:
        from promptgrid.matrix.running.conversation_reader import import_conversation_results

        imported: ImportSummary = import_conversation_results(run_dir, results)
        return imported

    def functions(self, dataset: str, bfcl_data: Any) -> list[dict[str, Any]]:
        """The docs of the dataset's English conversations at their last turn (held-out docs included)."""
        from promptgrid.matrix.conversations import load_conversations

        conversations = load_conversations(dataset, bfcl_data=bfcl_data)
        return [dict(f) for c in conversations if c.language == "en" for f in c.functions_at(len(c.turns))]

    def status(self, run_dir: Path, *, poll: bool, wait: bool, poll_s: float) -> RunStatus:
        """Episodes per model (stored, finished, valid, unfinished), the steps stored, and the batches in its
        ledger. Nothing is polled (``poll``, ``wait`` and ``poll_s`` change nothing): the run's own command
        (``run --batch`` again) collects a live batch, before any episode plays."""
        from collections import Counter

        from promptgrid.matrix.running.session import RunStatus
        from promptgrid.matrix.running.store import conversation_store

        with conversation_store(run_dir) as store:
            episodes = store.episodes()
            steps = store.step_count()
            batches = store.batches()
        rows: dict[str, list[int]] = {}
        for e in episodes:  # as a single-turn run's: errors (counted as failed), pending, unsupported
            row = rows.setdefault(e.model, [0, 0, 0, 0, 0, 0])
            status = e.status
            row[0] += 1
            row[1] += e.valid is not None
            row[2] += bool(e.valid)
            row[3] += status == "error"
            row[4] += status == "pending"
            row[5] += status == "unsupported"
        note = None
        if batches:
            states = ", ".join(f"{n} {state}" for state, n in sorted(Counter(b.state for b in batches).items()))
            note = f"batches: {len(batches)} ({states})"
        return RunStatus(run_dir, [(m, *r) for m, r in rows.items()], batches, note=note, kind=self.name,
                         columns=("model", "episodes", "finished", "valid", "errors", "unfinished", "unsupported"),
                         headers=("model", "episodes stored", "finished", "valid", "errors (of finished)",
                                  "unfinished (resumed by run)", "unsupported"),
                         heading=f"{run_dir}: a conversation run, {steps:,} model answers stored",
                         extra={"steps_stored": steps},
                         live_hint="run the same command with --batch to collect them and go on")

    def report(self, source: Any, out: Path | None, *, formats: set[str], baseline: str | None,
               episodes: Sequence[str] | None, transcripts: int | None) -> ConversationReportResult:
        """The console summary (and the per-language one when the run has more than one language); with ``out``,
        ``conversations.md``, ``conversations.json`` and ``conversations.html`` as ``formats`` ask (md, json,
        html, all; other formats are single-turn only). ``episodes``/``transcripts`` choose the transcripts of
        the HTML page. Everything is built before anything is written: a bad ``episodes`` writes nothing."""
        import json

        from promptgrid.errors import OutputError, ReportError
        from promptgrid.matrix.report._conversations import conversation_report

        from ._run import Run

        wrong = sorted(formats - {"all", "md", "json", "html"})
        if wrong:
            raise ReportError(f"a conversation run's report is written as md, json or html, not {', '.join(wrong)}: "
                              "use --format md, json, html or all.")
        if baseline is not None:
            raise ReportError("baseline applies to a single-turn report; a conversation report compares every "
                              "variant with the first one of the grid (its paired comparisons).")
        html = bool(formats & {"all", "html"})
        if (episodes or transcripts is not None) and not html:
            raise ReportError("--episode and --transcripts choose the transcripts of conversations.html: add "
                              "--format html (or all).")
        run = source if isinstance(source, Run) else Run(source)
        results, variants = run.episodes(), run.variants()  # read once for both reports
        report = conversation_report(results, variants, labels=run.labels())
        console = report.console()
        languages = None  # the per-language section, when the run has more than one language
        if len({e.language for e in results}) > 1:
            from promptgrid.matrix.report._conversation_languages import language_report

            languages = language_report(results, variants)
            console += languages.console()
        if out is None or not formats:
            return ConversationReportResult(report, languages, (), console)
        if out.exists() and not out.is_dir():
            raise OutputError(f"--out {out} is a file; give a directory for the conversations.* files.")
        texts = {}
        if formats & {"all", "md"}:
            texts["conversations.md"] = report.to_markdown() + ("" if languages is None else
                                                                "\n" + languages.to_markdown())
        if formats & {"all", "json"}:
            data = report.to_dict()
            data["languages"] = None if languages is None else languages.to_dict()
            texts["conversations.json"] = json.dumps(data, indent=2, allow_nan=False) + "\n"
        if html:
            from promptgrid.matrix.report._conversation_html import conversation_run_html
            from promptgrid.matrix.report._transcripts import MAX_TRANSCRIPTS

            texts["conversations.html"] = conversation_run_html(
                run.path, report=report, languages=languages, results=results, transcripts=episodes,
                max_transcripts=MAX_TRANSCRIPTS if transcripts is None else transcripts)
        from promptgrid.matrix.report import write_files

        return ConversationReportResult(report, languages, write_files(out, texts), console)

    def score_file(self, source: IO[bytes], sink: IO[str], *, name: str, dataset: str, grid: str | None,
                   variant: str | None, strict_arguments: bool, bfcl_data: Any,
                   errors: IO[str]) -> tuple[int, int, int, str]:
        """Score bfcl-eval's multi-turn result lines (``scoring._score_conversations``): each step decoded in
        ``variant``'s format (default: bfcl-eval's Python calls), run against the entry's environment, the entry
        scored turn by turn."""
        from promptgrid.errors import GridError, closest
        from promptgrid.matrix.conversations import load_conversations, score_conversation_stream
        from promptgrid.matrix.episodes._environment import warm_up
        from promptgrid.matrix.scoring import variant_index

        warm_up()  # the environments' fork server starts while the conversations load
        return_format, tag = "python", False
        if variant is not None:
            variants = variant_index(grid)
            if variant not in variants:
                raise GridError(f"--variant {variant!r} is not a variant id of "
                                f"{grid or 'the built-in grids'}.{closest(variant, variants)}")
            chosen = variants[variant]
            return_format, tag = chosen.return_format.value, chosen.tool_call_tag
        conversations = load_conversations(dataset, bfcl_data=bfcl_data)
        scored, valid, failed = score_conversation_stream(source, sink, name=name, conversations=conversations,
                                                          errors=errors, return_format=return_format,
                                                          tool_call_tag=tag, strict_arguments=strict_arguments)
        rule = "strict" if strict_arguments else "bfcl (lenient)"
        return scored, valid, failed, f" (entries: every turn must be right; arguments: {rule})"

    def render_dataset(self, grid: Grid, dataset: str, *, variants: Sequence[str], cases: Sequence[str],
                       limit: int | None, store: str | None, bfcl_data: Any, jsonl: bool) -> Iterator[str]:
        """Each conversation in full, as each variant sends it, for the ground truth's trajectory
        (``render_conversation``: the calls of the ground truth, their real results)."""
        import json

        from promptgrid.display import escape_controls
        from promptgrid.matrix.conversations import render_conversation
        from promptgrid.matrix.datasets._conversations import select_conversations
        from promptgrid.matrix.running.session import make_renderer

        from ._text import message_lines, request_fields, request_summary

        labels = {v.id: v.label for v in grid}
        chosen_variants = grid.select(list(variants))
        conversations = select_conversations(dataset, cases=list(cases), limit=limit, bfcl_data=bfcl_data)
        renderer = make_renderer(chosen_variants, template_dir=grid.template_dir, translation_store=store,
                                 bfcl_data=bfcl_data)
        for conversation in conversations:
            for variant in chosen_variants:
                messages, request = render_conversation(conversation, variant, renderer=renderer)
                if jsonl:
                    yield json.dumps({"variant_id": variant.id, "case_id": conversation.id, "label": labels[variant.id],
                                      "trajectory": "ground_truth", "messages": messages, **request_fields(request)},
                                     ensure_ascii=False, default=str) + "\n"
                    continue
                yield (f"=== {escape_controls(conversation.id)} | {labels[variant.id]} | {variant.id} | the ground "
                       "truth's trajectory\n" + message_lines(messages) + escape_controls(request_summary(request))
                       + "\n")

    def render_run(self, run_dir: Path, *, models: Sequence[str], variants: Sequence[str], cases: Sequence[str],
                   repeats: Sequence[int], limit: int | None, dataset: str | None, bfcl_data: Any,
                   jsonl: bool) -> Iterator[str]:
        """The chosen episodes as they happened (``transcript_text``; with ``jsonl`` one object per episode with
        its ``transcript_record``)."""
        from promptgrid.matrix.report._episode_export import (
            iter_transcripts,
            json_line,
            select_episodes,
            transcript_record,
            transcript_text,
        )
        from promptgrid.matrix.running.store import conversation_store

        with conversation_store(run_dir) as store:
            episodes, labels = store.episodes(), store.labels()
        chosen = select_episodes(episodes, models=models, variants=variants, cases=cases, repeats=repeats,
                                 labels=labels, limit=limit)
        if not chosen:
            return
        conversations = None
        if dataset:  # where to read the conversations when the store's dataset cannot be read where it says
            from promptgrid.matrix.datasets._conversations import select_conversations

            conversations = select_conversations(dataset, cases=sorted({e.conversation_id for e in chosen}),
                                                 bfcl_data=bfcl_data)
        for transcript in iter_transcripts(run_dir, chosen, conversations=conversations, bfcl_data=bfcl_data,
                                           labels=labels):
            if jsonl:
                e = transcript.episode
                yield json_line({"variant_id": e.variant_id, "case_id": e.conversation_id, "label": transcript.label,
                                 "trajectory": "run", "model": e.model, "repeat": e.repeat, "valid": e.valid,
                                 "failure_mode": e.failure_mode, "transcript": transcript_record(transcript)})
            else:
                yield transcript_text(transcript) + "\n"

    def rescore(self, run_dir: Path) -> dict[str, int]:
        from promptgrid.matrix.running.conversation_reader import rescore_conversations

        return rescore_conversations(run_dir)

    def print_rescore(self, run_dir: Path, stats: dict[str, int], out: TextIO, err: TextIO) -> int:
        """What re-scoring did (``err``) and the run's report table (``out``); 1 when some episodes could not be
        played again or judged (they are left as they were)."""
        from promptgrid.matrix.episodes._run import Run

        print(f"re-scored {stats['scored']} episodes from their stored steps ({stats['changed']} changed validity; "
              f"{stats['errors']} have no verdict to redo: errors, environment failures, unfinished or unsupported; "
              f"{stats['not_replayed']} could not be played again from the store, which lacks a step; "
              f"{stats['failed']} could not be judged, their environment failed). No model was called.", file=err)
        if stats["scored"] or stats["changed"]:
            out.write(Run(run_dir).report().console())
        return 1 if stats["failed"] or stats["not_replayed"] else 0

    def estimate(self, config: RunConfig, *, append: bool) -> PlanEstimate:
        """A conversation run directory keeps every variant's episodes: ``append`` changes nothing."""
        from promptgrid.matrix.running.conversation_describe import estimate_conversation_config

        return estimate_conversation_config(config)

    def dry_run(self, config: RunConfig, *, append: bool, out: TextIO) -> None:
        from promptgrid.matrix.running.conversation_describe import dry_run_conversations

        dry_run_conversations(config, append=append, out=out)

    def print_run(self, run: Run, out: TextIO, err: TextIO) -> int:
        from promptgrid.matrix.running.conversation_describe import print_conversation_run

        return print_conversation_run(run, out, err)

    def export_lines(self, run_dir: Path) -> tuple[Iterator[str], Path, str]:
        """One JSON line per episode: ``Result.episode_dict()`` plus its ``transcript``
        (``report._episode_export``). The episodes are read first: a damaged store is an error before anything
        is written."""
        from promptgrid.matrix.report._episode_export import export_records, json_line
        from promptgrid.matrix.running.store import conversation_store
        from promptgrid.matrix.running.store_episodes import CONVERSATION_STORE

        with conversation_store(run_dir) as store:
            episodes = store.episodes()
        return (json_line(record) for record in export_records(run_dir, episodes)), run_dir / CONVERSATION_STORE, \
            "episodes"


CONVERSATION = Conversations()


@dataclass(frozen=True)
class ConversationReportResult:
    """What ``pg.report`` gives for a conversation run: the report, its per-language report (``None`` for a run
    of one language), the files written, and the console text."""

    report: Any
    """The ``ConversationReport`` (pass^k, per turn, failure modes, native - prompt)."""
    languages: Any
    """The ``LanguageReport`` when the run has more than one language, else ``None``."""
    files: tuple[Path, ...]
    console: str



def _batch_mode(batch: bool, batch_wait: bool) -> None:
    if batch and not batch_wait:
        raise RunError("--no-wait (batch_wait=False) applies to a single-turn batch run: a conversation's next step "
                       "needs the answer of this one, so a conversation run with --batch waits for each round (drop "
                       "--no-wait).")


def _starter(config: RunConfig, grid: Any, *, batch: bool, batch_poll_s: float, progress: bool,
             started: Any = None, retry_errors: bool = False) -> Any:
    """A function that makes the run's coroutine (made where it is awaited: a coroutine belongs to no loop until
    then, but one made and never awaited warns). ``started``: given the run's stop (``signals.Stopper``)."""
    import sys

    from promptgrid.matrix.running.conversation_reader import arun_conversation_config
    from promptgrid.variants import Grid

    from ._run import Run

    async def start() -> Run:
        summary = await arun_conversation_config(config, grid=grid if isinstance(grid, Grid) else None, batch=batch,
                                                 batch_poll_s=batch_poll_s, progress=sys.stderr if progress else None,
                                                 started=started, retry_errors=retry_errors)
        return Run(config.run_dir, summary=summary)

    return start
