"""The kinds of episode promptgrid runs, and the one place that tells them apart.

An episode is the unit of work: a model plays a case under a variant. A
single-turn case is a one-step episode (render, send once, score the
answer); a conversation plays user turns and model steps against its
environment and is scored turn by turn. A ``Kind`` is what the library does
with one of them: run a config (and say what a run did, or would do),
write and read a round of requests for a batch file, list a dataset's
function docs, score a file of answers, write its report, export its
results and say where a run stands.

``kind_of_dataset`` and ``kind_of_run`` are the only questions asked about
the kind of a dataset or a run directory (``Run`` asks it once, in
``_run``, to choose its reads; ``Run.kind`` names the answer and
``kind_named`` turns the name into the ``Kind``); every other module takes
the ``Kind`` and calls it (``api``, the CLI). Both kinds send every model
call through one function (``running/sending.send``) and read their options
from one ``RunConfig``, and store into one schema (``running/store.py``'s
tables), and both run on one engine (``running/runner.Driver``): a
single shot's work is ``Runner``'s, a conversation's ``EpisodeRunner``'s
(``running/conversation_runner.py``).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol, TextIO

from ._guard import check_run_dir_kind

if TYPE_CHECKING:  # pragma: no cover - types only
    from promptgrid.matrix.running.config import RunConfig
    from promptgrid.matrix.running.estimate import PlanEstimate
    from promptgrid.matrix.running.exchange import ExportSummary, ImportSummary
    from promptgrid.matrix.running.session import RunStatus
    from promptgrid.variants import Grid

    from ._run import Run

__all__ = ["Kind", "check_run_dir_kind", "kind_named", "kind_of_dataset", "kind_of_run"]


class Kind(Protocol):
    """What promptgrid does with one kind of episode (see the module's docstring)."""

    name: str
    """``"single"`` (one-step episodes: jobs) or ``"conversation"`` (episodes of turns and steps)."""

    def run(self, config: RunConfig, grid: Any, *, progress: bool, retry_errors: bool, append: bool,
            batch: bool, batch_wait: bool, batch_poll_s: float) -> Run:
        """Run ``config`` (``pg.run``): in a new event loop, or on a worker thread inside a running one."""
        ...

    def arun(self, config: RunConfig, grid: Any, *, progress: bool, retry_errors: bool, append: bool,
             batch: bool, batch_wait: bool, batch_poll_s: float) -> Awaitable[Run]:
        """``run``, awaited in the caller's event loop (``pg.arun``)."""
        ...

    def export_batch(self, run_dir: Path, model: str, out: Any, *, grid: Any, dataset: str | None,
                     body_model: str | None, append: bool, retry_errors: bool,
                     options: Mapping[str, Any]) -> ExportSummary:
        """The next requests of ``model`` as an OpenAI batch file (``pg.export_batch``)."""
        ...

    def import_batch(self, run_dir: Path, results: Path) -> ImportSummary:
        """Store the answers of a batch output file to an export's requests (``pg.import_batch``)."""
        ...

    def functions(self, dataset: str, bfcl_data: Any) -> list[dict[str, Any]]:
        """Every function doc the dataset offers (what a translation of descriptions covers)."""
        ...

    def status(self, run_dir: Path, *, poll: bool, wait: bool, poll_s: float) -> RunStatus:
        """Where a run directory stands (``pg.status``), after polling its batches where the kind polls them."""
        ...

    def report(self, source: Any, out: Path | None, *, formats: set[str], baseline: str | None,
               episodes: Sequence[str] | None, transcripts: int | None) -> Any:
        """``pg.report`` of a run of this kind (``source``: a ``Run`` or its path): the console text, and with
        ``out`` the ``formats`` written there (``.console``, ``.files``)."""
        ...

    def score_file(self, source: IO[bytes], sink: IO[str], *, name: str, dataset: str, grid: str | None,
                   variant: str | None, strict_arguments: bool, bfcl_data: Any,
                   errors: IO[str]) -> tuple[int, int, int, str]:
        """``promptgrid score-file``: score the answer lines of ``source`` against ``dataset``, writing each
        scored line to ``sink`` and each line that cannot be scored to ``errors``; returns (scored, valid,
        failed, what an entry's verdict means, said after the accuracy)."""
        ...

    def render_dataset(self, grid: Grid, dataset: str, *, variants: Sequence[str], cases: Sequence[str],
                       limit: int | None, store: str | None, bfcl_data: Any, jsonl: bool) -> Iterator[str]:
        """``promptgrid render GRID --dataset DS``: what each variant sends for each case, as text blocks (or JSON
        lines); nothing is sent."""
        ...

    def render_run(self, run_dir: Path, *, models: Sequence[str], variants: Sequence[str], cases: Sequence[str],
                   repeats: Sequence[int], limit: int | None, dataset: str | None, bfcl_data: Any,
                   jsonl: bool) -> Iterator[str]:
        """``promptgrid render RUN_DIR``: the chosen results of a run as they happened (prompts, answers, calls,
        tool results, verdicts), rebuilt from the store; nothing is sent. Nothing when the run has none."""
        ...

    def rescore(self, run_dir: Path) -> dict[str, int]:
        """``promptgrid score RUN_DIR``: judge the run's stored answers again, calling no model; counts of what was
        scored, changed and left (the kind's own keys, printed by ``cli/score``)."""
        ...

    def print_rescore(self, run_dir: Path, stats: dict[str, int], out: TextIO, err: TextIO) -> int:
        """What ``rescore`` did (``err``) and the run's results now (``out``); returns the exit code."""
        ...

    def estimate(self, config: RunConfig, *, append: bool) -> PlanEstimate:
        """``pg.estimate``: what the config would send and cost (``running.estimate.PlanEstimate``), calling nothing;
        what the run would refuse is refused now (``RunError``)."""
        ...

    def dry_run(self, config: RunConfig, *, append: bool, out: TextIO) -> None:
        """``promptgrid run --dry-run``: what the config would run, written to ``out``; nothing is sent, and what
        the run would refuse is refused now."""
        ...

    def print_run(self, run: Run, out: TextIO, err: TextIO) -> int:
        """What a run just did (``err``), its results and what they mean (``out``); returns the exit code
        ``promptgrid run`` gives it (0 done, 1 the models' calls failed, 3 ``--max-cost``, 130 interrupted)."""
        ...

    def export_lines(self, run_dir: Path) -> tuple[Iterator[str], Path, str]:
        """``promptgrid export``: the run's results as JSON lines, the store file they are read from (an
        output never replaces it), and the noun counted in the closing line ("jobs", "episodes")."""
        ...


def kind_of_dataset(spec: str) -> Kind:
    """The kind of a dataset spec: conversations (``bfcl:multi_turn_*``, ``mini-mt``, ``mini-mt:LANGS``, a
    ``jsonl:`` file whose first record has ``involved_classes``) or single-turn cases (every other spec)."""
    from promptgrid.matrix.conversations import is_conversation_dataset

    return _conversation_kind() if is_conversation_dataset(spec) else _single_kind()


def kind_named(name: str) -> Kind:
    """The ``Kind`` whose ``name`` this is (``Run.kind``): ``"single"`` or ``"conversation"``."""
    if name not in ("single", "conversation"):
        raise ValueError(f"no kind of episode is named {name!r}: single or conversation.")
    return _conversation_kind() if name == "conversation" else _single_kind()


def kind_of_run(run_dir: str | os.PathLike[str]) -> Kind:
    """The kind of a run directory: a conversation run (its ``conversations.sqlite3`` and no single-turn store
    beside it) or a single-turn one (every other path; reading it says what is wrong with it)."""
    from promptgrid.matrix.conversations import is_conversation_run

    return _conversation_kind() if is_conversation_run(run_dir) else _single_kind()


def _single_kind() -> Kind:
    from ._single import SINGLE

    return SINGLE


def _conversation_kind() -> Kind:
    from ._conversation import CONVERSATION

    return CONVERSATION

