"""OpenAI batch files for engines promptgrid does not talk to: ``export-batch`` and ``import-batch``.

A GPU cluster running ``vllm run-batch`` (or any engine that reads and writes
the OpenAI batch format) answers a file of requests offline. ``export_requests``
writes one model's new calls of a run as that file, one line per call, its
``custom_id`` the job key; ``import_results`` stores the result lines the
engine wrote. The file format is ``promptgrid.matrix.clients._batch``'s (the
body is exactly what the online call sends: messages, parameters, tools,
response_format or the grammar the model's ``constraints`` names).

Export walks the model's plan with the runner's own producer (``Runner``:
jobs recorded in the store, one line per distinct call): it skips calls with a
stored result (errors too, unless ``retry_errors``), calls in a live provider
batch (``--batch``), and calls the model cannot be sent (stored
``unsupported``, as a run stores them). It records the export in the store
(``BatchRecord`` of kind ``export``, state ``exported``, with its jobs) before
the file is complete, so import can check that every line belongs to the run.
Exporting again writes the calls that are still without a result again, under
a new export record; an import takes lines of any export of the run.

Import checks the whole file before it stores anything: every line parses as
a result line, every ``custom_id`` is a job of an export of this run, and no
``custom_id`` is there twice; the error names ``file:line``. Then it stores
the lines as calls and verdicts (``batch.store_results``; no cost: a
self-hosted engine's price is unknown). It is idempotent: a line whose call
already has an answer, or an error line whose call already has any result, is
left as it is, so importing the same file twice changes nothing; an answer
replaces a stored error (a later run of the engine answered it). An export
all of whose calls have a result is marked ``collected``; calls of an export
that no imported file answered stay pending.

Both take the run directory's lock (``RunLock``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import IO, Any, cast

from promptgrid.errors import OutputError, RunError
from promptgrid.matrix.clients import LineResult, OpenAIBatchBackend, decode_result, encode_request_line, provider_of
from promptgrid.providers import CallError
from promptgrid.records import Case
from promptgrid.safeio import atomic_output, check_output, read_json_lines, writes_in_place
from promptgrid.variants import Variant

from .batch import store_results
from .config import ModelSpec, RunConfig
from .connection import RunLock, disk_full_errors
from .ledger import COLLECTED, EXPORTED, BatchJob, BatchRecord
from .runner import Lane, Runner, Transport, _params_json
from .session import (
    RUN_JSON,
    Plan,
    Prepared,
    _invocation,
    _now,
    _write_run_json,
    build_config,
    check_run_dir,
    plan_status,
    read_run_json,
    refresh_pending,
    run_sync,
)
from .store import STORE_FILE, RunStore, stored_records

__all__ = ["EXPORT_KIND", "ExportSummary", "ImportSummary", "export_config", "export_requests", "import_results"]

EXPORT_KIND = "export"
"""``BatchRecord.kind`` of an export-batch record."""

FILE_ENGINE = "http://export-batch.invalid/v1"
"""The ``api_base`` an exported model without one is checked with (never contacted): the file's engine."""

#: Problems an import names before it says how many more there are.
MAX_PROBLEMS = 10

Scorer = Callable[[str, Variant, Case], Any]


@dataclass(frozen=True)
class ExportSummary:
    """What ``export_requests`` wrote and skipped. Job counts add up to ``jobs``."""

    model: str
    export_id: str | None
    """The export's record in the store (``None`` when no line was written)."""
    lines: int
    """Request lines written: one per distinct call."""
    jobs: int
    """Jobs in the model's plan."""
    shared: int
    """Jobs whose call is a line written for another job (an identical prompt of another variant)."""
    stored: int
    """Jobs whose call already has a result (an answer, or an error without ``retry_errors``)."""
    unsupported: int
    """Jobs the model cannot be sent (stored ``unsupported``, as a run stores them)."""
    in_batch: int
    """Jobs whose call is in a live provider batch of a ``--batch`` run (collected by it, not exported)."""
    bytes: int = 0
    planned: str | None = None
    """An adaptive plan (``goal``): why it wrote no further round (its next round needs this one's results:
    ``import-batch``, then ``export-batch`` again); None when the plan is complete or not adaptive."""


@dataclass(frozen=True)
class ImportSummary:
    """What ``import_results`` stored."""

    lines: int
    """Result lines in the file."""
    stored: int
    """Calls stored (answers and errors)."""
    answers: int
    errors: int
    already: int
    """Lines left as they were: their call already had that answer (or, for an error line, any result)."""
    pending: int
    """Calls of this run's exports still without a result (not answered by any imported file)."""
    collected: tuple[str, ...] = ()
    """Exports this import completed (every call has a result)."""
    error_kinds: Mapping[str, int] = field(default_factory=dict)


# --------------------------------------------------------------------------- export


def export_config(run_dir: str | os.PathLike[str], model: str, *, grid: Any = None, dataset: str | None = None,
                  **options: Any) -> tuple[RunConfig, bool]:
    """The run config an export of ``model`` from ``run_dir`` uses, and whether it is new to the directory.

    Without ``grid``: the latest invocation's config in ``run_dir/run.json``
    (``RunError`` when there is none), restricted to ``model`` (its spec there,
    or one made as ``promptgrid run --model`` makes it). With ``grid`` (and
    ``dataset``): a config made from these options, as ``promptgrid run``
    makes it, so an export can start a run directory. ``options`` are
    ``session.build_config``'s (``limit``, ``params``, ``constraints``,
    ``api_base``, ...); they override the recorded values.
    """
    path = Path(run_dir)
    _check_store_present(path)
    if grid is not None:
        return build_config(grid, dataset, models=[model], run_dir=path, **options), True
    if dataset is not None:
        raise RunError("--dataset needs --grid: the run directory's own grid and dataset are used otherwise.")
    data = read_run_json(path)
    invocations = data.get("invocations") or []
    record = (invocations[-1].get("config") if invocations and isinstance(invocations[-1], dict) else None) \
        or data.get("config")
    if not isinstance(record, dict):
        raise RunError(f"{path / RUN_JSON} is missing or names no run config, so export-batch does not know the "
                       "grid and dataset. Give them: promptgrid export-batch RUN_DIR --model M --grid GRID "
                       "--dataset DS (the same selection options as promptgrid run).")
    recorded = config_of_record(record, path)
    spec = next((m for m in recorded.models if m.name == model), None)
    return build_config(recorded, models=[spec or model], run_dir=path, **options), False


def _check_store_present(run_dir: Path) -> None:
    """Refuse a run directory whose store is empty, or gone while its ``run.json`` says a run wrote there:
    exporting would make a new, empty store in its place and export every job again as if nothing had been
    answered. Nothing is written before this check."""
    store, record = run_dir / STORE_FILE, run_dir / RUN_JSON
    try:
        empty = store.stat().st_size == 0
    except FileNotFoundError:
        if record.exists():
            raise RunError(f"{store} is missing, but {record} says a run wrote to {run_dir}: its results are not "
                           "there. Restore store.sqlite3 (with its -wal file, if any) from a backup or copy of "
                           "the run directory, or export into a new --run-dir with --grid and --dataset.") from None
        return
    except OSError as exc:
        raise RunError(f"cannot read {store}: {exc.strerror or exc}.") from None
    if empty:
        raise RunError(f"{store} is empty (0 bytes): it is not a run store, and its results, if it had any, are "
                       "gone. Restore it from a backup or copy of the run directory, or move it aside (and "
                       f"{RUN_JSON} with it) to start this run directory over.")


def config_of_record(record: Mapping[str, Any], run_dir: Path, where: str = RUN_JSON) -> RunConfig:
    """A ``RunConfig`` from its record (``RunConfig.to_dict``: ``run.json``'s, or the one a conversation store keeps
    of its export rounds, ``where`` names the file), in ``run_dir`` wherever it was."""
    model_fields = set(ModelSpec.__dataclass_fields__)
    try:
        models = tuple(ModelSpec(**{k: v for k, v in m.items() if k in model_fields})
                       for m in record.get("models") or () if isinstance(m, dict))
        fields = {k: v for k, v in record.items() if k in RunConfig.__dataclass_fields__}
        fields.update(models=models, run_dir=run_dir, cases=tuple(fields.get("cases") or ()),
                      variants=tuple(fields.get("variants") or ()))
        return RunConfig(**fields)
    except (TypeError, ValueError) as exc:
        raise RunError(f"{run_dir / where}: its run config cannot be read back ({exc}). Give the grid and "
                       "dataset again: promptgrid export-batch RUN_DIR --model M --grid GRID --dataset DS.") from None


def export_requests(prep: Prepared, out: IO[bytes] | str | os.PathLike[str], *, new_run: bool = False,
                    append: bool = False, body_model: str | None = None, retry_errors: bool = False,
                    scorer: Scorer | None = None) -> ExportSummary:
    """Write the new calls of ``prep``'s one model as OpenAI batch request lines; record the export.

    ``out``: a path (written to a temporary file, renamed when complete) or a
    binary stream (written once the export is recorded). ``new_run``: the
    config is not the run directory's yet (``export_config``): the directory
    is checked like a run's (``check_run_dir``, ``append``) and the invocation
    recorded in ``run.json``. ``body_model`` replaces the body's ``model``
    (``vllm run-batch`` serves the name the server was started with).
    ``scorer`` scores stored answers of jobs that have none yet (as a run
    does); ``promptgrid.matrix.scoring.score`` by default, loaded only then.
    Raises ``RunError`` for a model that is not a litellm model string.
    """
    config = prep.config
    spec, backend = export_backend(config, out)
    run_dir = Path(config.run_dir)
    with disk_full_errors(run_dir), RunLock(run_dir):
        if new_run:
            check_run_dir(prep, append=append)
        with RunStore(run_dir, create=True) as store:
            invocation = None
            if new_run:
                invocation = _invocation(prep, append=append, retry_errors=retry_errors)
                invocation["export_batch"] = {"model": spec.name}
                _write_run_json(prep, invocation)
            path = os.fspath(out) if isinstance(out, (str, os.PathLike)) else None
            if path is not None and not writes_in_place(path):  # a file: renamed into place when complete
                with atomic_output(path, binary=True) as handle:
                    summary = _export(store, prep, spec, backend, handle, body_model=body_model,
                                      retry_errors=retry_errors, scorer=scorer, output=path)
            else:  # a stream, '-', a FIFO or a device: the export is recorded before a line leaves
                with tempfile.TemporaryFile() as spool:
                    summary = _export(store, prep, spec, backend, spool, body_model=body_model,
                                      retry_errors=retry_errors, scorer=scorer, output=path)
                    spool.seek(0)
                    sink_cm: contextlib.AbstractContextManager[IO[Any]] = (
                        atomic_output(path, binary=True) if path is not None
                        else contextlib.nullcontext(cast("IO[bytes]", out)))
                    try:
                        with sink_cm as sink:
                            while chunk := spool.read(1 << 20):
                                sink.write(chunk)
                            sink.flush()
                    except OSError as exc:  # the stream's disk or device, not the run directory's
                        name = getattr(out, "name", None)
                        where = path or ("standard output" if name in ("<stdout>", 1) else
                                         name if isinstance(name, str) and name else "the output stream")
                        raise OutputError(f"cannot write {where}: {exc.strerror or exc}; the export is recorded "
                                          "in the run: export again to write its lines.") from None
            if invocation is not None:
                invocation.update(finished=_now(), pending=sum(p for _jobs, p in plan_status(
                    store, Plan.of(invocation)).values()))
                invocation["export_batch"].update(lines=summary.lines, export=summary.export_id)
                _write_run_json(prep, invocation)
    return summary


def export_backend(config: RunConfig, out: Any) -> tuple[ModelSpec, OpenAIBatchBackend]:
    """What ``export-batch`` writes with, checked before any work (single-turn and conversation runs alike):
    ``out`` neither an input nor a run's own file, one model, a litellm model string; the model's spec and the
    OpenAI line format's backend (its client never sends: with no ``api_base``, it decides what the model
    cannot be sent as a run does for an OpenAI-compatible server, native tools trusted: the engine that reads
    the file is such a server, ``vllm run-batch``). Raises ``RunError``/``OutputError``."""
    if isinstance(out, (str, os.PathLike)):
        check_output(out)
    if len(config.models) != 1:
        raise RunError("export-batch writes the requests of one model at a time: give one --model.")
    spec = config.models[0]
    if provider_of(spec.name) != "litellm":
        raise RunError(f"export-batch writes OpenAI chat-completion requests, for a litellm model string "
                       f"(hosted_vllm/NAME, openai/NAME, ...), not {spec.name}: local and fake models run online "
                       "(promptgrid run).")
    from promptgrid.matrix.clients import make_client

    client = make_client(spec.name, api_base=spec.api_base or FILE_ENGINE, constraints=spec.constraints)
    return spec, OpenAIBatchBackend(client)


def _export(store: RunStore, prep: Prepared, spec: ModelSpec, backend: OpenAIBatchBackend, handle: IO[bytes], *,
            body_model: str | None, retry_errors: bool, scorer: Scorer | None, output: str | None) -> ExportSummary:
    """Walk the plan with the runner's producer, write the lines to ``handle``, record the export; returns the
    counts."""
    config = dataclasses.replace(prep.config, models=(spec,), max_cost=None)
    export = ExportTransport(backend=backend, handle=handle, body_model=body_model)
    runner = Runner(config, variants=prep.variants, cases=prep.cases, renderer=prep.renderer,
                    clients={spec.name: backend.client}, store=store, scorer=scorer or _score,
                    retry_errors=retry_errors, transport=export)
    summary = run_sync(runner.run(), "promptgrid-export")
    if summary.stopped == "interrupted":
        raise KeyboardInterrupt  # nothing recorded: the file is not complete
    handle.flush()
    export_id = None
    if export.lines:
        export_id = f"export-{time.strftime('%Y%m%d%H%M%S')}-{uuid.uuid4().hex[:10]}"
        now = time.time()
        detail = json.dumps({"output": output, "body_model": body_model}, separators=(",", ":"))
        store.add_batch(BatchRecord(export_id, spec.name, EXPORT_KIND, EXPORTED, None, None, None, None,
                                    len(export.lines), export.bytes, now, now, detail), export.lines)
    return ExportSummary(model=spec.name, export_id=export_id, lines=len(export.lines), jobs=summary.jobs,
                         shared=summary.shared, stored=summary.cached, unsupported=summary.unsupported,
                         in_batch=summary.in_batch, bytes=export.bytes,
                         planned=summary.planned.get(spec.name))


class ExportTransport(Transport):
    """One writer that puts each new call in the export file instead of sending it.

    The producer is the runner's own, so an export leaves out exactly what a
    run would not send (stored results, identical prompts, unsupported call
    modes, calls in a live batch) and scores stored answers that have no
    verdict yet, as a run does. A written call stays in flight until the end,
    so the later jobs with the same key join it (``shared``) and no key is
    written twice. An adaptive plan writes its next round: the round after it
    needs this one's results (``import-batch``, then ``export-batch`` again).
    """

    def __init__(self, *, backend: OpenAIBatchBackend, handle: IO[bytes], body_model: str | None) -> None:
        self.backend = backend
        self.handle = handle
        self.body_model = body_model
        self.lines: list[BatchJob] = []
        self.bytes = 0

    def workers(self, runner: Runner, lane: Lane) -> int:
        return 1

    async def settle(self, runner: Runner, lane: Lane, keys: set[str]) -> bool:
        if not keys & runner._inflight.keys():
            return True  # every cell of the round was stored already (a resumed plan)
        lane.planned_note = ("this round is written to the export file; store its results (promptgrid import-batch) "
                             "and run export-batch again for the next round")
        return False

    async def work(self, runner: Runner, lane: Lane) -> None:
        while (call := await lane.queue.get()) is not None:
            job = call.job
            line = self.backend.encode(job.key, job.messages, job.params, job.request)
            if self.body_model is not None:
                request = json.loads(line)
                line = encode_request_line(job.key, {**request["body"], "model": self.body_model})
            self.handle.write(line)
            self.bytes += len(line)
            runner.progress.done += 1
            self.lines.append(BatchJob(job.key, job.model, job.repeat, job.prompt_sha256, _params_json(job.params),
                                       int(job.request is not None and job.request.get("call_mode") == "native")))


def _score(response: str, variant: Variant, case: Case) -> Any:
    """``promptgrid.matrix.scoring.score``, imported on first use (an export that scores nothing never loads it)."""
    from promptgrid.matrix.scoring import score

    return score(response, variant, case)


# --------------------------------------------------------------------------- import


def import_results(run_dir: str | os.PathLike[str], results: str | os.PathLike[str], *,
                   scorer: Scorer | None = None) -> ImportSummary:
    """Store the result lines of ``results`` (an OpenAI batch output file) in ``run_dir``.

    Checks the whole file first and stores nothing when a line does not parse,
    names a ``custom_id`` that no export of this run wrote, or repeats a
    ``custom_id``: ``RunError`` naming ``file:line`` (the first
    ``MAX_PROBLEMS`` problems) and what to do. Then stores every line (see
    the module docstring). ``scorer``: ``promptgrid.matrix.scoring.score`` by
    default.
    """
    path = Path(run_dir)
    if not (path / STORE_FILE).is_file():
        raise RunError(f"{path} is not a run directory (no {STORE_FILE}). Import into the directory "
                       "promptgrid export-batch wrote the requests from.")
    source = Path(results)
    with disk_full_errors(path), RunLock(path), RunStore(path) as store:
        exports = [b for b in store.batches() if b.kind == EXPORT_KIND]
        if not exports:
            raise RunError(f"{path} has no export: import-batch stores the answers to requests that "
                           "promptgrid export-batch wrote from this run directory. Export first: promptgrid "
                           "export-batch RUN_DIR --model M -o requests.jsonl")
        lines, jobs = _check(source, store, exports)
        if scorer is None:
            from promptgrid.matrix.scoring import score as default_scorer

            scorer = default_scorer
        variants, cases = stored_records(store)
        keep = _KeepStored(store)
        counts = store_results(store, keep(_read(source)), jobs, scorer=scorer, variants=variants, cases=cases)
        collected = []
        pending: set[str] = set()
        for export in exports:
            if export.state != EXPORTED:
                continue
            keys = list(store.batch_jobs(export.id))
            answered = store.lookup(keys)
            missing = [k for k in keys if k not in answered]
            if missing:
                pending.update(missing)
            else:
                store.update_batch(export.id, state=COLLECTED)
                collected.append(export.id)
        if counts.written:
            refresh_pending(path, store)
    # ``kept`` are answers only: error lines over a stored result never reach store_results (``_KeepStored``).
    return ImportSummary(lines=lines, stored=counts.written, answers=counts.answers - counts.kept,
                         errors=counts.errors, already=counts.kept + keep.already, pending=len(pending),
                         collected=tuple(collected), error_kinds=dict(counts.error_kinds))


def _read(source: Path) -> Iterator[tuple[int, LineResult | str]]:
    """(line number, its result or what is wrong with it) for each non-blank line of ``source``."""
    try:
        f = open(source, "rb")  # noqa: SIM115 - closed below; OSError reported with the path
    except OSError as exc:
        raise RunError(f"cannot read {source}: {exc.strerror or exc}. Give the output file of the batch "
                       "engine (vllm run-batch -o FILE).") from None
    with f:
        for line in read_json_lines(f):
            if line.error is not None:
                yield line.number, f"not a JSON line: {line.error}"
                continue
            try:
                yield line.number, decode_result(line.value, f"{source}:{line.number}")
            except CallError:
                yield line.number, ("not a batch result line (a JSON object with a string custom_id and a "
                                    "response or an error)")


def _check(source: Path, store: RunStore, exports: Sequence[BatchRecord]) -> tuple[int, dict[str, BatchJob]]:
    """Read the whole file: the number of lines and the exported jobs they answer; ``RunError`` listing every
    line that does not parse, is foreign or is a duplicate."""
    problems: list[tuple[int, str]] = []
    first: dict[str, int] = {}
    lines = 0
    for number, result in _read(source):
        lines += 1
        if isinstance(result, str):
            problems.append((number, result))
        elif result[0] in first:
            problems.append((number, f"custom_id {result[0]} is also on line {first[result[0]]}: a job is "
                                     "answered once; keep one of the two lines"))
        else:
            first[result[0]] = number
    jobs: dict[str, BatchJob] = {}
    for export in exports:
        jobs.update((k, j) for k, j in store.batch_jobs(export.id).items() if k in first)
    foreign = [k for k in first if k not in jobs]
    problems += [(first[k], f"custom_id {k} is not a job promptgrid export-batch wrote for this run directory")
                 for k in foreign]
    if problems:
        problems.sort()
        shown = "\n".join(f"  {source}:{n}: {what}" for n, what in problems[:MAX_PROBLEMS])
        more = f"\n  ... and {len(problems) - MAX_PROBLEMS} more" if len(problems) > MAX_PROBLEMS else ""
        hint = (" Foreign lines come from requests another run directory exported: import the file into the run "
                "directory its requests were exported from." if foreign else "")
        raise RunError(f"{source}: nothing stored: {len(problems)} line(s) cannot be imported:\n{shown}{more}\n"
                       f"Fix or remove these lines and import again.{hint}")
    return lines, jobs


class _KeepStored:
    """Drops the error lines whose call already has a result (counted in ``already``), so a second import of
    the same file rewrites nothing; answers go on (``store_results`` keeps a stored answer, and an answer
    replaces a stored error)."""

    def __init__(self, store: RunStore, chunk: int = 500) -> None:
        self.store = store
        self.chunk = chunk
        self.already = 0

    def __call__(self, lines: Iterable[tuple[int, LineResult | str]]) -> Iterator[LineResult]:
        results = (r for _, r in lines if not isinstance(r, str))  # lines that do not parse: refused by _check
        while batch := list(islice(results, self.chunk)):
            stored = self.store.lookup([key for key, outcome in batch if isinstance(outcome, CallError)])
            for r in batch:
                if isinstance(r[1], CallError) and r[0] in stored:
                    self.already += 1
                else:
                    yield r
