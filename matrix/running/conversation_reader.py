"""The library entry points of a conversation run: ``run_conversation_config`` and ``ConversationReader``.

``promptgrid run GRID --dataset bfcl:multi_turn_base ...``, ``pg.run`` and
``pg.arun`` come here when the dataset is a conversation dataset
(``is_conversation_dataset``): BFCL's multi-turn categories, ``mini-mt``
(``mini-mt:LANGS``), or a ``jsonl:`` file whose first record has
``involved_classes``. The run options are the ``RunOptions`` of a
single-turn run; the one that does not apply to conversations is refused
before anything is sent (``--batch``), and the others mean what they mean
there (models with their parameters, timeout, concurrency, ``rpm``/``tpm``,
repeats, limit, cases, variants, run directory, ``--max-cost`` for the whole
run directory, and ``--goal``/``--budget``/``--rounds``/``--seed``: an
adaptive study whose cells are (variant, conversation, repeat) episodes,
planned by the single-turn planner, see ``_run``; ``Run.adaptive``
says what it found).
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from promptgrid.errors import InputLimitError, MissingDependencyError, RunError
from promptgrid.matrix.running.results import EPISODE_FIELDS, Result, turn_record
from promptgrid.matrix.running.store import RunStore, conversation_store
from promptgrid.matrix.running.store_episodes import CONVERSATION_STORE
from promptgrid.safeio import read_json_lines

if TYPE_CHECKING:  # pragma: no cover - types only
    import pandas as pd

__all__ = ["ConversationReader", "arun_conversation_config", "episodes_frame", "is_conversation_dataset",
           "render_conversation", "rescore_conversations", "run_conversation_config"]


def is_conversation_dataset(spec: str) -> bool:
    """Whether ``spec`` names conversations (BFCL's ``multi_turn_*`` categories, or a ``jsonl:`` file of them)."""
    if spec.startswith("bfcl:multi_turn_") or spec == "mini-mt" or spec.startswith("mini-mt:"):
        return True
    if not spec.startswith("jsonl:"):
        return False
    from promptgrid.matrix.datasets._conversations import dataset_files

    files = dataset_files(spec)  # the path as the loader reads it (stripped, ~ expanded)
    if not files:
        return False
    path = files[0]
    try:
        if not path.is_file():  # a FIFO would block the open; a device is not a dataset (the loader says why)
            return False
        with path.open("rb") as fh:
            # Bounded: the first non-blank line, as far as the loader's own line bound reaches (so a first line the
            # loader reads is recognised however long), blank lines included up to _SNIFF_SLACK more (a
            # multi-gigabyte line or a file of blank lines is not read whole here; the loader reports it).
            from promptgrid.safeio import input_limits

            line_bound = input_limits()[0]
            first = next(read_json_lines(fh, max_line_bytes=line_bound, max_file_bytes=line_bound + _SNIFF_SLACK,
                                         objects=True), None)
    except (OSError, InputLimitError):
        return False
    return first is not None and first.error is None and "involved_classes" in first.value


_SNIFF_SLACK = 1_000_000  # bytes of blank lines before the first line that recognising reads past the line bound


class ConversationReader:
    """``Run``'s reads of a conversation run directory (``runs.Run`` answers its methods with these): each opens
    the store read-only and closes it again."""

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.path = Path(run_dir)
        if not (self.path / CONVERSATION_STORE).is_file():
            raise RunError(f"{self.path} holds no conversation run ({CONVERSATION_STORE} is missing).")

    def episodes(self, models: Sequence[str] | None = None) -> list[Result]:
        with conversation_store(self.path) as store:
            return store.episodes(models=models)

    def results(self, include_pending: bool = False) -> list[Result]:
        return self.episodes()  # an episode is stored once it starts: an unfinished one is its pending result

    def rows(self) -> list[Any]:
        """Each stored episode as its flat ``ResultRow`` (``Result.row``), with its variant's dimensions and
        label as the run recorded them."""
        variants, labels = self.variants(), self.labels()
        return [e.row(variants.get(e.variant_id), labels.get(e.variant_id, e.variant_id)) for e in self.episodes()]

    def to_pandas(self, include_pending: bool = False) -> pd.DataFrame:
        return episodes_frame(self.episodes(), self.variants(), self.labels())

    def accuracy(self) -> list[Any]:
        """Per (model, variant): valid / finished episodes with its Wilson interval (the report's ``accuracy``)."""
        from promptgrid.matrix.report._wilson import wilson_interval
        from promptgrid.matrix.running.results import AccuracyRow

        tally: dict[tuple[str, str], list[int]] = {}
        for e in self.episodes():
            if e.valid is not None:
                cell = tally.setdefault((e.model, e.variant_id), [0, 0])
                cell[0] += 1
                cell[1] += bool(e.valid)
        labels = self.labels()
        return [AccuracyRow(model, vid, labels.get(vid, vid), n, correct, correct / n, *wilson_interval(correct, n))
                for (model, vid), (n, correct) in sorted(tally.items())]

    def counts(self, config: Mapping[str, Any] | None = None) -> dict[str, int]:
        with conversation_store(self.path) as store:
            episodes, steps = store.episodes(), store.step_count()
        finished = [e for e in episodes if e.valid is not None]
        statuses = Counter(e.status for e in episodes)
        return {"episodes": len(episodes), "finished": len(finished), "valid": sum(bool(e.valid) for e in finished),
                "errors": statuses["error"], "unfinished": statuses["pending"],
                "unsupported": statuses["unsupported"], "steps": steps}

    def pending(self, config: Mapping[str, Any] | None = None) -> int:
        return sum(e.status == "pending" for e in self.episodes())

    def spend(self) -> float:
        with conversation_store(self.path) as store:
            return store.spend()

    def variants(self) -> dict[str, dict[str, str]]:
        with conversation_store(self.path) as store:
            return store.variant_dimensions()

    def meta(self, config: Mapping[str, Any] | None = None) -> dict[str, Any]:
        with conversation_store(self.path) as store:
            return {key: store.meta(key) for key in ("grid", "dataset", "models")}

    def adaptive(self, config: Mapping[str, Any] | None = None, trace: bool = True) -> dict[str, Any]:
        """The latest run's adaptive findings: its planner replayed against the stored episodes
        (``_run.conversation_findings``); ``{}`` when it ran every episode."""
        from promptgrid.matrix.running.conversation_runner import conversation_findings

        with conversation_store(self.path) as store:
            plan = store.meta("plan")
            if not plan or not plan.get("goal"):
                return {}
            episodes = store.episodes(models=plan.get("models") or ())
            dimensions, labels = store.variant_dimensions(), store.labels()
        return conversation_findings(plan, episodes, dimensions, labels, trace=trace)

    def report(self, run: Any = None, options: Mapping[str, Any] | None = None) -> Any:
        """The ``ConversationReport`` of every stored episode (``_report.conversation_report``; ``options``:
        ``k``, ``confidence``)."""
        from promptgrid.matrix.report._conversations import conversation_report

        return conversation_report(self.episodes(), self.variants(), labels=self.labels(), **dict(options or {}))

    def labels(self) -> dict[str, str]:
        with conversation_store(self.path) as store:
            return store.labels()

    def language_report(self, baseline: str = "en", k: int | None = None, confidence: float = 0.95) -> Any:
        from promptgrid.matrix.report._conversation_languages import language_report

        return language_report(self.episodes(), self.variants(), baseline=baseline, k=k, confidence=confidence)


FRAME_TURN_COLUMNS = ("valid", "failure_mode", "steps", "calls")
"""Per user turn ``i``, the columns ``turn_{i}_valid``, ``turn_{i}_failure_mode``, ``turn_{i}_steps`` and
``turn_{i}_calls`` of ``episodes_frame`` (``_records.turn_record``'s fields)."""


def episodes_frame(episodes: Sequence[Result], variants: Mapping[str, Mapping[str, str]] | None = None,
                   labels: Mapping[str, str] | None = None) -> pd.DataFrame:
    """``episodes`` as a pandas DataFrame, one row per episode (``Run.to_pandas``).

    Columns: an episode's stored fields (``EPISODE_FIELDS``) but ``turns`` and ``details``, in their order (``model``,
    ``variant_id``, ``conversation_id``, ``category``, ``repeat``, ``valid``, ``failure_mode``, ``steps``, ``sent``,
    tokens, ``cost_usd``, ``latency_s``, ``error``, ``language``, ``template``); then ``label`` (the grid's label of the
    variant), ``dimensions`` (its dimension values, ``variants``), ``call_mode``, ``turns`` (user turns scored),
    ``stopped`` (``"max_cost"`` for an episode the cost cap left unfinished, else ``None``), ``status``
    (``Result.status``: done, error, pending, unsupported), and the per-turn columns ``turn_{i}_valid``,
    ``turn_{i}_failure_mode``, ``turn_{i}_steps``, ``turn_{i}_calls`` for every turn index any episode has (missing
    where an episode has fewer turns, or none: unfinished, an environment failure). ``valid`` and ``turn_{i}_valid`` are
    nullable booleans (``<NA>``: unfinished or not scored). No episode: an empty frame with the fixed columns.
    """
    try:
        import pandas as pd
    except ImportError:
        raise MissingDependencyError("Run.to_pandas() (episodes as a pandas DataFrame)",
                                     "pip install 'promptgrid[pandas]' (or pip install pandas)") from None
    variants, labels = variants or {}, labels or {}
    fields = [name for name in EPISODE_FIELDS if name not in ("turns", "details")]
    most = max((len(e.turns) for e in episodes), default=0)
    per_turn = [f"turn_{i}_{name}" for i in range(most) for name in FRAME_TURN_COLUMNS]
    columns = [*fields, "label", "dimensions", "call_mode", "turns", "stopped", "status", *per_turn]
    records = []
    for e in episodes:
        row: dict[str, Any] = {name: getattr(e, name) for name in fields}
        dims = dict(variants.get(e.variant_id, {}))
        row.update(label=labels.get(e.variant_id, e.variant_id), dimensions=dims,
                   call_mode=dims.get("call_mode", "prompt"), turns=len(e.turns),
                   stopped=e.details.get("stopped"), status=e.status)
        for turn in e.turns:
            record = turn_record(turn)
            for name in FRAME_TURN_COLUMNS:
                row[f"turn_{turn.turn}_{name}"] = record[name]
        records.append(row)
    frame = pd.DataFrame.from_records(records, columns=columns)
    for column in ("valid", *(c for c in per_turn if c.endswith("_valid"))):
        frame[column] = frame[column].astype("boolean")
    return frame


def run_conversation_config(config: Any, *, grid: Any = None, batch: bool = False, batch_poll_s: float = 30.0,
                            progress: Any = None, retry_errors: bool = False) -> Any:
    """Run a ``RunConfig`` whose dataset is a conversation dataset (``promptgrid run`` and ``pg.run`` come here,
    through the conversation ``Kind``, which makes the ``Run``); returns the ``ConversationRunSummary``.

    ``grid``: the loaded ``Grid`` when the caller has it (else ``config.grid`` is loaded). ``progress``: a text
    stream for a line per finished episode. Raises ``RunError``
    (and the loaders' ``GridError``/``DatasetError``) before anything is sent for what cannot be run.
    Every option of the config applies as in a single-turn run, ``rpm``/``tpm`` per model, ``max_cost``
    for the run directory and an adaptive ``goal`` (its ``budget``, ``rounds`` and ``plan_seed``) included
    (``_run.arun_episodes``). Not in a running event loop (``asyncio.run``):
    there, await ``arun_conversation_config``. ``batch``: new steps go in provider batches, a round at a time,
    polled every ``batch_poll_s`` seconds (``_run.arun_episodes``); each model's ``batch:`` options apply.
    ``retry_errors``: play again the stored episodes a step's error ended (``arun_episodes``).
    """
    return asyncio.run(arun_conversation_config(config, grid=grid, batch=batch, batch_poll_s=batch_poll_s,
                                                progress=progress, retry_errors=retry_errors))


async def arun_conversation_config(config: Any, *, grid: Any = None, batch: bool = False,
                                   batch_poll_s: float = 30.0, progress: Any = None,
                                   export: tuple[Any, Any, list[Any]] | None = None,
                                   started: Any = None, retry_errors: bool = False) -> Any:
    """``run_conversation_config``, awaited in the caller's event loop (``pg.arun`` comes here). ``export``:
    (client, batch backend, list) of ``export_conversation_round``: the model's round goes to the list.
    ``started``: given the run's stop once its episodes are driven (``arun_episodes``)."""
    from promptgrid.matrix.clients._scripted import SCRIPTED_MODELS, ScriptedClient
    from promptgrid.matrix.datasets._conversations import select_conversations
    from promptgrid.matrix.running.conversation_runner import _check_options, arun_episodes, check_episodes
    from promptgrid.matrix.running.session import _clients, make_renderer
    from promptgrid.variants import load_grid

    _check_options(batch, config.goal, config.budget, config.rounds)
    from promptgrid.matrix.episodes._environment import warm_up

    warm_up()  # the environments' fork server starts while the grid and the conversations load
    grid = grid if grid is not None else load_grid(config.grid)
    variants = grid.select(config.variants)
    conversations = select_conversations(config.dataset, cases=config.cases, limit=config.limit,
                                         bfcl_data=config.bfcl_data)
    check_episodes(len(config.models), len(variants), len(conversations), config.repeats, max_jobs=config.max_jobs)
    renderer = make_renderer(variants, template_dir=grid.template_dir, translation_store=config.translation_store,
                             bfcl_data=config.bfcl_data)
    if conversations:
        from promptgrid.matrix.episodes._first_turn import first_turn_case

        for variant in variants:  # a template or catalog error stops the run before any call
            renderer.render(variant, first_turn_case(conversations[0]))
    scripted = [spec for spec in config.models if spec.name in SCRIPTED_MODELS]
    others = [spec for spec in config.models if spec.name not in SCRIPTED_MODELS]
    clients: dict[str, Any] = {spec.name: ScriptedClient(spec.name) for spec in scripted}
    from promptgrid.redact import Redactor

    redactor = Redactor()  # one per run, shared by the clients and the runner's stored errors
    backends = None
    if export is not None:
        clients[config.models[0].name], backend, _lines = export
        backends = {config.models[0].name: backend}
    else:
        clients.update(_clients(None, redactor, others))
    if batch and backends is None:
        from promptgrid.matrix.running.session import batch_backends

        backends = batch_backends(config.models, clients, retry=config.retry_policy())
    summary = await arun_episodes(config, variants, conversations, clients=clients, renderer=renderer,
                                  progress=progress, redactor=redactor, batch=batch, batch_backends=backends,
                                  batch_poll_s=batch_poll_s, export_round=None if export is None else export[2],
                                  on_start=started, retry_errors=retry_errors)
    return summary


class _Recorder:
    """Wraps a client and keeps the messages and request of its last call (``render_conversation``)."""

    def __init__(self, client: Any) -> None:
        self.client, self.name = client, client.name
        self.wraps_episode = getattr(client, "takes_episode", False)
        self.takes_episode = True
        self.last: tuple[list[dict[str, Any]], Any] = ([], None)
        self.answers: list[Any] = []
        self.where = (0, 0)

    async def complete(self, messages: Any, params: Mapping[str, Any], **kwargs: Any) -> Any:
        self.last = ([dict(m) for m in messages], kwargs.get("request"))
        episode = kwargs.get("episode")
        if episode is not None:
            self.where = (episode.turn, episode.step)
        if not self.wraps_episode:
            kwargs.pop("episode", None)
        completion = await self.client.complete(messages, params, **kwargs)
        self.answers.append(completion)
        return completion

    def unsupported(self, request: Mapping[str, Any]) -> str | None:
        return None

    async def aclose(self) -> None:
        return None


def render_conversation(conversation: Any, variant: Any, *, model: str = "fake/ground-truth", renderer: Any = None,
                        step_limit: int = 20) -> tuple[list[dict[str, Any]], Mapping[str, Any] | None]:
    """The whole conversation ``variant`` sends for a scripted trajectory: every message up to and including the
    model's last answer, and the request sent with the last step (native tools, constrained grammar; ``None``
    in prompt mode).

    ``model`` scripts the answers offline: ``fake/ground-truth`` (the default: the ground truth's calls, turn
    by turn, and their real results from the environment), ``fake/prose`` or ``fake/hostile``. It runs the
    episode as a run does (same messages, same decoding), in a temporary directory that is removed.
    """
    import tempfile
    from pathlib import Path

    from promptgrid.matrix.running.config import ModelSpec, RunConfig
    from promptgrid.matrix.running.conversation_runner import arun_episodes, make_conversation_client

    recorder = _Recorder(make_conversation_client(model))
    with tempfile.TemporaryDirectory(prefix="promptgrid-render-") as tmp:
        config = RunConfig(grid="", dataset="", models=(ModelSpec(model, concurrency=1),), run_dir=Path(tmp),
                           max_steps=step_limit)
        asyncio.run(arun_episodes(config, [variant], [conversation], clients={model: recorder}, renderer=renderer))
    messages, request = recorder.last
    if recorder.answers:
        from promptgrid.matrix.episodes._steps import Transcript, stored_answer

        transcript = Transcript(conversation, variant, renderer)
        transcript.messages = messages
        transcript.add_answer(stored_answer(recorder.answers[-1], variant), *recorder.where)
        messages = transcript.messages
    return messages, request


# --------------------------------------------------------------------------- export-batch / import-batch rounds

def rescore_conversations(run_dir: str | os.PathLike[str], *, bfcl_data: str | os.PathLike[str] | None = None,
                          ) -> dict[str, int]:
    """Judge every scored episode of a conversation run again, calling no model (``promptgrid score RUN_DIR``):
    the single-turn ``session.rescore`` of a conversation run.

    Each episode with a verdict is played again from the store (``StoredReplay.trajectory``: every step's stored
    answer, its calls run on a fresh environment, the run's step limit), judged by the run's scorer
    (``StateScorer``, the run's argument rule) and stored again when its verdict changed; its usage (steps
    sent, tokens, cost, latency) is kept. Use it after a fix to the checker or the simulated APIs. The step limit
    is the one the run recorded (``meta`` ``step_limit``); a store written before that has it from a turn its
    verdict says was force-quit (its steps less one), else ``promptgrid run``'s default.

    Returns counts: ``scored``, ``changed`` (validity flipped), ``errors`` (episodes without a verdict to redo:
    errors, environment failures, unfinished or unsupported ones), ``not_replayed`` (a step the store does not
    have: the grid, templates, dataset or decoding changed since the run; left as they were) and ``failed`` (the
    environment failed while judging; left as they were). Runs under the run directory's lock; raises
    ``RunError`` when it holds no conversation run or its dataset cannot be read now."""
    from promptgrid.matrix.running.conversation_runner import _run_dir_lock
    from promptgrid.matrix.running.session import run_sync

    path = Path(run_dir)
    if not (path / CONVERSATION_STORE).is_file():
        raise RunError(f"{path} holds no conversation run ({CONVERSATION_STORE} is missing).")

    async def judged() -> dict[str, int]:
        with _run_dir_lock(path), conversation_store(path, readonly=False) as store:
            return await _rescore(store, bfcl_data)

    result: dict[str, int] = run_sync(judged(), "promptgrid-rescore")
    return result


async def _rescore(store: RunStore, bfcl_data: Any) -> dict[str, int]:
    from functools import partial

    from promptgrid.matrix.episodes._conversation_play import StateScorer, episode_result
    from promptgrid.matrix.episodes._environment import Environment, EnvironmentFailure
    from promptgrid.matrix.report._transcripts import StoredReplay

    episodes = store.episodes()
    scored = [e for e in episodes if isinstance(e.details.get("verdict"), Mapping)]
    stats = {"scored": 0, "changed": 0, "errors": len(episodes) - len(scored), "not_replayed": 0, "failed": 0}
    if not scored:
        return stats
    replay = StoredReplay(store, {}, bfcl_data)
    problem = replay.load({e.conversation_id for e in scored}, None, None)
    if problem:
        raise RunError(f"{store.run_dir}: {problem}")
    limit = _step_limit(store.meta("step_limit"), scored)
    scorer = StateScorer(step_limit=limit, make_env=partial(Environment, bfcl_data=bfcl_data),
                         strict_arguments=replay.strict)
    for e in scored:
        walk = await replay.trajectory(e, limit)
        if isinstance(walk, str):
            stats["not_replayed"] += 1
            continue
        try:
            verdict = await asyncio.to_thread(scorer.score, walk, walk.conversation)
        except EnvironmentFailure:
            stats["failed"] += 1
            continue
        fresh = episode_result(walk, verdict)
        again = e.episode_with(valid=fresh.valid, failure_mode=fresh.failure_mode, turns=fresh.turns,
                               details={**e.details, "verdict": fresh.details["verdict"]})
        stats["scored"] += 1
        stats["changed"] += again.valid != e.valid
        if again != e:
            store.add_episode(again)
    return stats


def _step_limit(recorded: Any, episodes: Sequence[Result]) -> int:
    """The run's step limit: recorded, else one less than the steps of a turn its verdict says was force-quit
    (all of them had calls), else ``promptgrid run``'s default (no turn reached it: any limit above the turns'
    steps judges them alike)."""
    if isinstance(recorded, int) and not isinstance(recorded, bool) and recorded >= 1:
        return recorded
    for e in episodes:
        for turn in e.turns:
            steps = (turn.details or {}).get("steps")
            if turn.failure_mode is not None and turn.failure_mode.value == "step_limit" and isinstance(steps, int):
                return max(1, steps - 1)
    from promptgrid.matrix.scoring.state_check import MAXIMUM_STEP_LIMIT

    return MAXIMUM_STEP_LIMIT  # promptgrid run's default --max-steps, as bfcl-eval's


def export_conversation_round(config: Any, out: Any, *, body_model: str | None = None,
                              grid: Any = None, retry_errors: bool = False) -> Any:
    """``export-batch`` for a conversation run: the next round of every episode of ``config`` (one model), written
    as OpenAI batch request lines (what ``vllm run-batch`` reads), each ``custom_id`` the step's key.

    The episodes play from the stored steps until each needs an answer the store does not have; those requests
    are the round (``_batch.BatchRounds`` in export mode), recorded in the store's batch ledger (kind ``export``)
    before a line is written. An episode whose steps are all answered is scored and stored. ``import-batch``
    stores the answers; the next export writes the round after. ``out``: a path (replaced only when complete) or
    a binary stream. Returns an ``ExportSummary`` (``lines``: the round's requests; ``jobs``: the plan's
    episodes; ``stored``: episodes finished; ``planned``: what to do next, ``None`` once every episode is
    finished). ``retry_errors``: episodes a step's error ended are played again (their failed step goes in the
    round). Raises ``RunError`` for more than one model or a model that is not a litellm model string.
    """
    import contextlib
    import json
    import time
    import uuid

    from promptgrid.errors import OutputError
    from promptgrid.matrix.clients import encode_request_line
    from promptgrid.matrix.running.exchange import EXPORT_KIND, ExportSummary, export_backend
    from promptgrid.matrix.running.ledger import EXPORTED, BatchJob, BatchRecord
    from promptgrid.safeio import atomic_output

    spec, backend = export_backend(config, out)
    lines: list[Any] = []
    summary = asyncio.run(arun_conversation_config(config, grid=grid, batch=True,
                                                   export=(backend.client, backend, lines),
                                                   retry_errors=retry_errors))
    data: list[bytes] = []
    for line in lines:
        if body_model is None:
            data.append(line.data)
            continue
        request = json.loads(line.data)
        request["body"]["model"] = body_model
        data.append(encode_request_line(line.key, request["body"]))
    export_id = None
    if lines:  # recorded before a line is written: import-batch joins the answers to it
        export_id = f"export-{time.strftime('%Y%m%d%H%M%S')}-{uuid.uuid4().hex[:10]}"
        now = time.time()
        path = os.fspath(out) if isinstance(out, (str, os.PathLike)) else None
        detail = json.dumps({"output": path, "body_model": body_model, "conversations": True}, separators=(",", ":"))
        with conversation_store(config.run_dir, readonly=False) as store:
            store.add_batch(BatchRecord(export_id, spec.name, EXPORT_KIND, EXPORTED, None, None, None, None,
                                        len(lines), sum(map(len, data)), now, now, detail),
                            [BatchJob(line.key, spec.name, line.repeat, line.key, line.params, int(line.native))
                             for line in lines])
    path = os.fspath(out) if isinstance(out, (str, os.PathLike)) else None
    with contextlib.ExitStack() as stack:
        # A file is replaced only when complete; a FIFO, a device or a stream is written in place.
        handle = stack.enter_context(atomic_output(path, binary=True)) if path is not None else out
        try:
            handle.writelines(data)
            handle.flush()
        except OSError as exc:
            raise OutputError(f"cannot write {path or 'the output stream'}: {exc.strerror or exc}; the round is "
                              "recorded in the run: export again to write its lines.") from None
    planned = None
    if summary.waiting:
        planned = (f"{summary.waiting} episode(s) wait on this round: run it, promptgrid import-batch "
                   f"{config.run_dir} RESULTS.jsonl, then export-batch again for the next round")
    return ExportSummary(model=spec.name, export_id=export_id, lines=len(lines), jobs=summary.episodes,
                         shared=0, stored=summary.finished + summary.skipped, unsupported=0, in_batch=0,
                         bytes=sum(map(len, data)), planned=planned)


def import_conversation_results(run_dir: str | os.PathLike[str], results: str | os.PathLike[str]) -> Any:
    """``import-batch`` for a conversation run: store the answers of an OpenAI batch output file to the steps an
    ``export-batch`` round wrote (each as the step an online answer would store: redacted, cut to the bound;
    cost unknown). The whole file is checked first: a line that does not parse, a ``custom_id`` no export of
    this run wrote, or one given twice stores nothing and raises ``RunError`` naming ``file:line``. A line that
    is an error is counted, not stored: the next export writes that step again. Idempotent. Returns an
    ``ImportSummary``."""
    from collections import Counter

    from promptgrid.matrix.clients import decode_result_line
    from promptgrid.matrix.running.conversation_runner import _run_dir_lock, line_step
    from promptgrid.matrix.running.exchange import EXPORT_KIND, ImportSummary
    from promptgrid.matrix.running.ledger import COLLECTED
    from promptgrid.providers import CallError
    from promptgrid.redact import Redactor
    from promptgrid.safeio import bounded_lines

    path = Path(results)
    with _run_dir_lock(run_dir), conversation_store(run_dir, readonly=False) as store:
        exports = [b for b in store.batches() if b.kind == EXPORT_KIND]
        jobs = {key: (batch.id, job) for batch in exports for key, job in store.batch_jobs(batch.id).items()}
        found: dict[str, Any] = {}
        count = 0
        try:
            handle = path.open("rb")
        except OSError as exc:
            raise RunError(f"cannot read {path}: {exc.strerror or exc}.") from None
        with handle:
            for number, raw in enumerate(bounded_lines(handle, name=str(path)), start=1):
                if not raw.strip():
                    continue
                count += 1
                where = f"{path}:{number}"
                try:
                    key, outcome = decode_result_line(raw, where)
                except CallError as exc:
                    raise RunError(f"{where}: {exc}; nothing was stored.") from None
                if key not in jobs:
                    raise RunError(f"{where}: custom_id {key[:80]!r} is not a step an export-batch of "
                                   f"{run_dir} wrote; nothing was stored. Import the results of this run's exports.")
                if key in found:
                    raise RunError(f"{where}: custom_id {key[:80]!r} is given twice; nothing was stored.")
                found[key] = outcome
        exact = Redactor().exact
        stored = answers = errors = already = 0
        kinds: Counter[str] = Counter()
        for key, outcome in found.items():
            _batch_id, job = jobs[key]
            if isinstance(outcome, CallError):
                errors += 1
                kinds[outcome.kind.value] += 1
                continue
            if store.step(key) is not None:
                already += 1
                continue
            store.add_step(key, job.model, line_step(outcome, bool(job.native), None, exact))
            stored += 1
            answers += 1
        collected = []
        for batch in exports:
            keys = store.batch_jobs(batch.id)
            if batch.state != COLLECTED and all(store.step(key) is not None for key in keys):
                store.update_batch(batch.id, state=COLLECTED)
                collected.append(batch.id)
        pending = sum(1 for key in jobs if store.step(key) is None)
    return ImportSummary(lines=count, stored=stored, answers=answers, errors=errors, already=already,
                         pending=pending, collected=tuple(collected), error_kinds=dict(kinds))
