"""The library entry points of a conversation run: ``run_conversations`` and ``open_conversation_run``.

``promptgrid run GRID --dataset bfcl:multi_turn_base ...`` comes here when
the dataset is a conversation dataset (``is_conversation_dataset``): BFCL's
multi-turn categories, or a ``jsonl:`` file whose first record has
``involved_classes``. The run options are the ``RunOptions`` of a
single-turn run; those that do not apply to conversations are refused before
anything is sent (``--batch``, ``--goal``/``--budget``, ``--max-cost``),
and the others mean what they mean there (models with their parameters,
timeout and concurrency, repeats, limit, cases, variants, run directory).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from promptgrid.errors import InputLimitError, RunError
from promptgrid.safeio import read_json_lines

from ._records import EpisodeResult
from ._store import CONVERSATION_STORE, ConversationStore

__all__ = ["ConversationRun", "is_conversation_dataset", "open_conversation_run", "render_conversation",
           "run_conversation_config"]


def is_conversation_dataset(spec: str) -> bool:
    """Whether ``spec`` names conversations (BFCL's ``multi_turn_*`` categories, or a ``jsonl:`` file of them)."""
    if spec.startswith("bfcl:multi_turn_") or spec == "mini-mt" or spec.startswith("mini-mt:"):
        return True
    if not spec.startswith("jsonl:"):
        return False
    from ._dataset import dataset_files

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


class ConversationRun:
    """A conversation run directory: its episodes, its variants, its report. Read from the store each time."""

    def __init__(self, run_dir: str | os.PathLike[str], summary: Any = None) -> None:
        self.path = Path(run_dir)
        if not (self.path / CONVERSATION_STORE).is_file():
            raise RunError(f"{self.path} holds no conversation run ({CONVERSATION_STORE} is missing).")
        self.summary = summary
        """The ``ConversationRunSummary`` of the run that returned this object (``None`` when opened)."""

    def episodes(self, *, models: Sequence[str] | None = None) -> list[EpisodeResult]:
        with ConversationStore(self.path) as store:
            return store.episodes(models=models)

    def variants(self) -> dict[str, dict[str, str]]:
        with ConversationStore(self.path) as store:
            return store.variants()

    def meta(self) -> dict[str, Any]:
        with ConversationStore(self.path) as store:
            return {key: store.meta(key) for key in ("grid", "dataset", "models")}

    def report(self, *, k: int | None = None, confidence: float = 0.95) -> Any:
        """The ``ConversationReport`` of every stored episode (``_report.conversation_report``)."""
        from ._report import conversation_report

        return conversation_report(self.episodes(), self.variants(), k=k, confidence=confidence,
                                   labels=self.labels())

    def labels(self) -> dict[str, str]:
        """Variant id -> the grid's label, as the run recorded them (the report shows labels)."""
        with ConversationStore(self.path) as store:
            return dict(store.meta("labels", {}))

    def language_report(self, *, baseline: str = "en", k: int | None = None, confidence: float = 0.95) -> Any:
        """The ``LanguageReport`` of every stored episode, per language (``_languages.language_report``)."""
        from ._languages import language_report

        return language_report(self.episodes(), self.variants(), baseline=baseline, k=k, confidence=confidence)

    def __repr__(self) -> str:
        return f"ConversationRun({str(self.path)!r})"


def open_conversation_run(path: str | os.PathLike[str]) -> ConversationRun:
    """A finished (or partial) conversation run directory; ``RunError`` when it holds none."""
    return ConversationRun(path)


def _refuse_single_turn_options(config: Any) -> None:
    if config.max_cost is not None:
        raise RunError("--max-cost is not available for conversation datasets yet: a conversation's cost is only "
                       "known as it goes. Limit the run with --limit and --repeats instead.")


def run_conversation_config(config: Any, *, grid: Any = None, batch: bool = False,
                            progress: Any = None) -> ConversationRun:
    """Run a ``RunConfig`` whose dataset is a conversation dataset (``promptgrid run`` and ``pg.run`` come here).

    ``grid``: the loaded ``Grid`` when the caller has it (else ``config.grid`` is loaded). ``progress``: a text
    stream for a line per finished episode. Raises ``RunError``
    (and the loaders' ``GridError``/``DatasetError``) before anything is sent for what cannot be run.
    """
    from promptgrid.matrix.running.session import _clients, make_renderer
    from promptgrid.variants import load_grid

    from ._dataset import select_conversations
    from ._fakes import SCRIPTED_MODELS, ScriptedClient
    from ._run import _check_options, check_episodes, run_conversations

    _check_options(batch, config.goal)
    _refuse_single_turn_options(config)
    grid = grid if grid is not None else load_grid(config.grid)
    variants = grid.select(config.variants)
    conversations = select_conversations(config.dataset, cases=config.cases, limit=config.limit,
                                         bfcl_data=config.bfcl_data)
    check_episodes(len(config.models), len(variants), len(conversations), config.repeats, max_jobs=config.max_jobs)
    renderer = make_renderer(variants, template_dir=grid.template_dir, translation_store=config.translation_store,
                             bfcl_data=config.bfcl_data)
    if conversations:
        from ._render import first_turn_case

        for variant in variants:  # a template or catalog error stops the run before any call
            renderer.render(variant, first_turn_case(conversations[0]))
    scripted = [spec for spec in config.models if spec.name in SCRIPTED_MODELS]
    others = [spec for spec in config.models if spec.name not in SCRIPTED_MODELS]
    clients: dict[str, Any] = {spec.name: ScriptedClient(spec.name) for spec in scripted}
    from promptgrid.redact import Redactor

    redactor = Redactor()  # one per run, shared by the clients and the runner's stored errors
    clients.update(_clients(None, redactor, others))
    model_params: Mapping[str, Mapping[str, Any]] = {spec.name: dict(spec.params) for spec in config.models}
    summary = run_conversations(
        variants, conversations, models=[spec.name for spec in config.models], run_dir=config.run_dir,
        repeats=config.repeats, concurrency={spec.name: spec.concurrency for spec in config.models},
        model_params=model_params, timeouts={spec.name: spec.timeout for spec in config.models},
        clients=clients, renderer=renderer, retries=config.max_retries, retry_policy=config.retry_policy(),
        step_limit=config.max_steps, max_jobs=config.max_jobs, dedupe_requests=config.dedupe_requests,
        strict_arguments=config.strict_arguments,
        progress=progress, redactor=redactor,
        describe={"grid": config.grid, "dataset": config.dataset, "models": [spec.name for spec in config.models]})
    return ConversationRun(config.run_dir, summary)


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

    from ._run import make_conversation_client, run_conversations

    recorder = _Recorder(make_conversation_client(model))
    with tempfile.TemporaryDirectory(prefix="promptgrid-render-") as tmp:
        run_conversations([variant], [conversation], models=[model], run_dir=tmp, clients={model: recorder},
                          renderer=renderer, step_limit=step_limit, concurrency=1)
    messages, request = recorder.last
    if recorder.answers:
        from ._episode import Transcript, stored_answer

        transcript = Transcript(conversation, variant, renderer)
        transcript.messages = messages
        transcript.add_answer(stored_answer(recorder.answers[-1], variant), *recorder.where)
        messages = transcript.messages
    return messages, request
