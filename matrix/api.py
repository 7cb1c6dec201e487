"""The public Python API, re-exported lazily by ``promptgrid`` (``import promptgrid as pg``).

::

    grid = pg.load_grid("bfcl_v4")                  # built-in name or YAML path -> Grid
    cases = pg.load_dataset("mini:en")              # -> list[Case]
    for prompt in pg.render(grid, cases): ...       # Prompt: variant_id, case_id, messages, request
    run = pg.run(grid, "mini:en", models=["fake/auto"], run_dir="runs/x", limit=5)   # -> Run
    mt = pg.run(grid, "mini-mt:en", models=["fake/ground-truth"], run_dir="runs/mt")  # -> Run (kind "conversation")
    run = pg.open_run("runs/x")                     # read-only, also on a read-only copy
    rows = run.results()                            # list[ResultRow] (pg.load_results: also a JSONL export)
    table = run.accuracy()                          # list[AccuracyRow], 95% intervals
    pg.report(run, out="report/", formats=["md", "csv", "html"])
    verdict = pg.score(response_text, variant, case)
    pg.export_batch("runs/x", "hosted_vllm/m", "requests.jsonl")   # OpenAI batch file (vllm run-batch)
    pg.import_batch("runs/x", "results.jsonl")      # its answers, stored and scored
    checks = pg.check_translations(["de"])          # shipped catalogs + stored translations -> TranslationChecks

Functions return values and raise ``PromptgridError`` subclasses; nothing is
printed (``run(..., progress=True)`` draws a progress line on stderr). The
``promptgrid`` command is a thin layer over these functions and the modules
they call (``promptgrid.matrix.running.session``).

``run`` and ``arun`` take the options of ``promptgrid run`` and any dataset:
a conversation dataset (``bfcl:multi_turn_*``, ``mini-mt``, a ``jsonl:``
file of conversations) is run by the conversation runner and gives a
``ConversationRun``. A run that stops early (``max_cost`` reached, interrupted, a model halted by an error
every call would repeat, such as a bad key) is a result, not an exception:
see ``Run.summary``. ``run`` also works where an event loop is already
running (Jupyter): it then runs on a worker thread and waits for it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from typing_extensions import Unpack

from promptgrid.errors import (
    DatasetError,
    GridError,
    OutputError,
    PromptgridError,
    ReportError,
    RunError,
)
from promptgrid.matrix.episodes._run import Run
from promptgrid.matrix.episodes._run import Run as ConversationRun  # its name for conversation runs before one Run
from promptgrid.matrix.running.config import PlanOptions, RunConfig, RunOptions
from promptgrid.matrix.running.options import check_keywords, takes_options
from promptgrid.matrix.running.reader import FRAME_EXTRA_COLUMNS, results_frame  # noqa: F401 - re-exported
from promptgrid.matrix.running.results import AccuracyRow, ResultRow
from promptgrid.matrix.running.session import (
    build_config,
    make_renderer,
)
from promptgrid.records import Case, Prompt
from promptgrid.variants import Grid, Variant, load_grid

if TYPE_CHECKING:  # pragma: no cover - types only; the modules are imported when used

    from promptgrid.matrix.conversations import Conversation
    from promptgrid.matrix.datasets._conversation_translations import ConversationChecks, ConversationTranslations
    from promptgrid.matrix.datasets._translate_conversations import ConversationFinding, TranslatedConversation
    from promptgrid.matrix.running.estimate import PlanEstimate
    from promptgrid.matrix.running.exchange import ExportSummary, ImportSummary
    from promptgrid.matrix.running.session import RunStatus
    from promptgrid.translate import Finding, TranslationBackend
    from promptgrid.translate._catalogs import TranslationCatalog

__all__ = ["AccuracyRow", "ConversationRun", "Run", "TranslationChecks", "arun", "check_conversation_translations",
           "check_translations", "estimate", "export_batch", "import_batch", "load_dataset", "load_results",
           "open_conversation_run", "open_run", "render", "report", "run", "run_conversations",
           "status", "translate_conversations"]

PathLike = str | os.PathLike[str]


def _path(value: Any, name: str, error: type[PromptgridError] = RunError) -> Path:
    """``value`` as a ``Path``, or ``error`` naming the argument when it is not a (non-empty) path."""
    if isinstance(value, (str, os.PathLike)) and str(value):
        return Path(value)
    raise error(f"{name} must be a path (a str or os.PathLike), not {value!r}.")


# --------------------------------------------------------------------------- inputs


def load_dataset(spec: str, *, bfcl_data: PathLike | None = None) -> list[Case]:
    """The cases a dataset spec names: ``mini``, ``mini:de,ja``, ``bfcl:<category>``, ``jsonl:PATH``.

    ``bfcl_data``: where bfcl-eval's data is (a wheel, a folder or a gorilla
    checkout; default: the installed bfcl-eval or ``$PROMPTGRID_BFCL_DATA``).
    Raises ``DatasetError``, also for a conversation dataset (``mini-mt``, ``bfcl:multi_turn_*``): its message
    says to run it with ``run`` and load it with ``promptgrid.matrix.conversations.load_conversations``.
    """
    from promptgrid.matrix.datasets import load_dataset as _load

    return list(_load(spec, bfcl_data=bfcl_data).cases)


def _as_grid(grid: Grid | PathLike | Iterable[Variant], template_dir: PathLike | None) -> Grid:
    if isinstance(grid, Grid):
        return grid
    if isinstance(grid, (str, os.PathLike)):
        return load_grid(grid)
    if not isinstance(grid, Iterable) or isinstance(grid, Mapping):
        raise GridError("grid must be a Grid, a built-in grid name, a grid YAML path or a non-empty list of "
                        f"Variant, not {type(grid).__name__}.")
    variants = tuple(grid)
    wrong = next((v for v in variants if not isinstance(v, Variant)), None)
    if wrong is not None or not variants:
        raise GridError("grid must be a Grid, a built-in grid name, a grid YAML path or a non-empty list of "
                        f"Variant, not {type(wrong if wrong is not None else grid).__name__}.")
    return Grid("variants", "", variants, "<python>", template_dir=Path(template_dir) if template_dir else None)


def render(
    grid: Grid | PathLike | Iterable[Variant],
    cases: Iterable[Case] | str,
    *,
    variants: Iterable[str] | None = None,
    template_dir: PathLike | None = None,
    translation_store: PathLike | None = None,
    localization: Any = None,
    bfcl_data: PathLike | None = None,
) -> Iterator[Prompt]:
    """The prompts of ``grid`` x ``cases``, case by case (each case's variants in grid order).

    A native or constrained variant's prompt carries ``request`` (tools, or
    the answer's JSON schema / OpenAI ``response_format`` / GBNF grammar: see
    ``promptgrid.matrix.calling.call_request``); ``None`` in prompt call mode.

    ``grid``: a ``Grid``, a built-in name or YAML path, or Variants.
    ``cases``: ``Case`` records or a dataset spec. ``variants``: only these
    ids or labels. ``template_dir`` replaces the grid's user template folder.
    Translations (shipped catalogs + ``translation_store``) are read when a
    variant needs them, unless a ``localization`` is given. Input errors
    (``GridError``, ``DatasetError``, ``TranslationError``) are raised here;
    template errors (``TemplateError``, ``MissingTranslationError``) when the
    prompt that hits them is rendered.
    """
    g = _as_grid(grid, template_dir)
    chosen = g.select(variants or ())
    the_cases = load_dataset(cases, bfcl_data=bfcl_data) if isinstance(cases, str) else _case_list(cases)
    renderer = make_renderer(chosen, template_dir=template_dir or g.template_dir,
                             translation_store=translation_store, localization=localization, bfcl_data=bfcl_data)
    return _prompts(renderer, chosen, the_cases)


def _case_list(cases: Any) -> list[Case]:
    """``cases`` as a list of ``Case``, or ``DatasetError`` saying what to give."""
    listed = list(cases) if isinstance(cases, Iterable) and not isinstance(cases, Mapping) else None
    bad = [cases] if listed is None else [c for c in listed if not isinstance(c, Case)][:1]
    if listed is None or bad:
        raise DatasetError("cases must be a dataset spec (mini, mini:de, bfcl:<category>, jsonl:PATH) or a list of "
                           f"Case (pg.load_dataset), not {bad[0]!r:.80}.")
    return listed


def _prompts(renderer: Any, variants: Sequence[Variant], cases: Sequence[Case]) -> Iterator[Prompt]:
    # Case-major: a case's function docs are rendered once per doc format and reused by its variants.
    for case in cases:
        for variant in variants:
            yield renderer.render(variant, case)


# --------------------------------------------------------------------------- results


def status(run_dir: PathLike, *, poll: bool = True, wait: bool = False, poll_s: float = 30.0) -> RunStatus:
    """Where a run directory stands: its results per model and its batches (``RunStatus``).

    Single-turn: jobs per model (done, errors, pending, unsupported). A
    conversation run: episodes per model (stored, finished, valid,
    unfinished), the steps stored, and its ``--batch``/``export-batch``
    rounds (never polled here: the run's own command collects them).

    With ``poll`` (the default) the live batches of ``--batch`` runs are
    advanced and their results collected first (the models' credentials must
    be in the environment, as for the run); ``wait`` polls every ``poll_s``
    seconds until none is left. A run directory a run is writing is read
    without polling (``RunStatus.note`` says so). Raises ``RunError`` for a
    directory that is not a run, ``StoreError`` for a damaged store.
    """
    from promptgrid.matrix.episodes import kind_of_run

    path = _path(run_dir, "run_dir")
    return kind_of_run(path).status(path, poll=poll, wait=wait, poll_s=poll_s)


@takes_options(PlanOptions, "Options (``PlanOptions``: the run options an export takes, the flags of "
                            "``promptgrid export-batch``):")
def export_batch(run_dir: PathLike, model: str, out: PathLike | IO[bytes], *, body_model: str | None = None,
                 retry_errors: bool = False, grid: Grid | PathLike | RunConfig | None = None,
                 dataset: str | None = None, append: bool = False, **options: Unpack[PlanOptions]) -> ExportSummary:
    """Write ``model``'s calls of a run that have no result yet as an OpenAI batch file (what ``vllm run-batch``
    reads), one request line per call, its ``custom_id`` the job key; ``import_batch`` stores the answers.

    ``out``: a path (replaced only when complete) or a binary stream. The run
    is the latest config in ``run_dir/run.json`` (a conversation run: the one
    its first export round recorded in its store), restricted to ``model``; or,
    with ``grid`` (and ``dataset``), the one these options make, as ``run``
    makes it (this starts a run directory; ``append`` as in ``run``). The
    options below override the recorded ones (``constraints``: how
    constrained calls are written; ``vllm`` puts the grammar where vLLM reads
    it); those of how a run sends its calls (``concurrency``, ``max_cost``, ...)
    are ``run``'s only. Calls with a stored result (errors too,
    unless ``retry_errors``), in a live ``--batch`` batch, or that the model
    cannot be sent (stored ``unsupported``) are not written. ``body_model``
    replaces the ``model`` of every body (the name the vLLM server serves).
    The export is recorded in the store; exporting again writes the calls
    still without a result again. Returns the counts (``ExportSummary``).
    Raises ``RunError`` (no run config, not a litellm model, a directory of
    another grid, an option that is not one), ``OutputError`` for an ``out``
    that would destroy a file of the run.
    """

    check_keywords(options, PlanOptions, "export_batch()", also=export_batch.__kwdefaults__ or (),
                   wider=(RunOptions, "run()"))
    _path(run_dir, "run_dir")
    if not isinstance(model, str) or not model.strip():
        raise RunError(f"model must be a model string (e.g. hosted_vllm/my-model), not {model!r}.")
    if not hasattr(out, "write"):
        _path(out, "out", OutputError)
    from promptgrid.matrix.episodes import kind_of_dataset, kind_of_run

    path = _path(run_dir, "run_dir")
    kind = kind_of_dataset(dataset) if dataset is not None else kind_of_run(path)
    return kind.export_batch(path, model, out, grid=grid, dataset=dataset, body_model=body_model, append=append,
                             retry_errors=retry_errors, options=options)


def import_batch(run_dir: PathLike, results: PathLike) -> ImportSummary:
    """Store the answers of an OpenAI batch output file (``vllm run-batch -o FILE``) to requests that
    ``export_batch`` wrote from ``run_dir``; scored like a run's answers, cost unknown.

    The whole file is checked first: a line that does not parse, a
    ``custom_id`` no export of this run wrote, or one given twice stores
    nothing and raises ``RunError`` naming ``file:line``. Idempotent: a second
    import of the same file changes nothing (``ImportSummary.already``).
    Calls of the exports that the file does not answer stay pending
    (``ImportSummary.pending``).
    """
    from promptgrid.matrix.episodes import kind_of_run

    path = _path(run_dir, "run_dir")
    return kind_of_run(path).import_batch(path, _path(results, "results"))


def open_run(path: PathLike) -> Run:
    """Open an existing run directory read-only (also a read-only copy or archive: nothing is written there).

    Raises ``RunError`` if it is not one, and ``StoreError`` (a ``RunError``) naming the file if its store is
    corrupt, truncated, not a promptgrid store or from a newer promptgrid (also when rows are read later).
    """
    return Run(_path(path, "path"))


def load_results(source: Run | PathLike) -> list[ResultRow]:
    """The rows of a run, a run directory (read-only) or a JSONL file written by ``promptgrid export``: a
    conversation run gives one flat row per episode (``Run.rows``, ``Result.row``).

    Raises ``ReportError`` when the path is neither, naming what to give instead, and ``StoreError`` when
    the run directory's store is damaged (see ``open_run``).
    """
    from promptgrid.matrix.episodes._single import load_rows

    if not isinstance(source, Run):
        source = _path(source, "source (a Run, a run directory or a JSONL export)", ReportError)
    return load_rows(source)


def report(
    source: Run | PathLike | Iterable[ResultRow | Mapping[str, Any]],
    out: PathLike | None = None,
    *,
    formats: Iterable[str] = ("md",),
    baseline: str | None = None,
    episodes: Sequence[str] | None = None,
    transcripts: int | None = None,
) -> Any:
    """The report of a run, a run directory, an exported JSONL file or rows.

    ``out``: the folder to write ``formats`` into; without it nothing is
    written and the result holds the numbers and the console table
    (``.console``; ``.files``: what was written). Raises ``ReportError``.

    Single-turn (a ``ReportResult``): the sensitivity report, ``formats`` md,
    csv, latex, html, json, figures, or all; the numbers in ``.data``.
    ``baseline``: a variant id or label (as the report shows it) to test every
    other variant against. From a run directory (or ``Run``) the report also
    states the jobs its last invocation left pending (``.data.pending``), and
    for an adaptive run what it found (``.data.adaptive``: ``Run.adaptive()``
    as dicts, its own section, figure and ``report.json`` key).

    A conversation run (``.report``: the ``ConversationReport``, ``.languages``
    its per-language report when the run has several): ``formats`` md, json,
    html or all write ``conversations.md``, ``conversations.json`` and
    ``conversations.html`` (figures, the tables, and transcripts of chosen
    episodes: ``episodes``, ``CONVERSATION[#REPEAT]`` each, or by default per
    variant its first failed and first valid episode, at most ``transcripts``).
    """
    from promptgrid.matrix.episodes import kind_named, kind_of_run

    if isinstance(source, (Run, str, os.PathLike)):
        kind = kind_named(source.kind) if isinstance(source, Run) else kind_of_run(_path(source, "source", ReportError))
        return kind.report(source, _path(out, "out", ReportError) if out is not None else None,
                           formats=_formats(formats), baseline=baseline, episodes=episodes, transcripts=transcripts)
    if not isinstance(source, Iterable) or isinstance(source, (bytes, Mapping)):
        raise ReportError(f"source must be a Run, a run directory, a JSONL export or rows, not "
                          f"{type(source).__name__}.")
    from promptgrid.matrix.episodes._single import report_rows

    return report_rows(source, _path(out, "out", ReportError) if out is not None else None,
                       formats=_formats(formats), baseline=baseline, episodes=episodes, transcripts=transcripts)


def _formats(formats: Any) -> set[str]:
    """``formats`` as a set of names: a single string is one format (``"md"``), not its letters."""
    if isinstance(formats, str):
        return {formats}
    if not isinstance(formats, Iterable) or isinstance(formats, Mapping):
        raise ReportError(f"formats must be a format name or a list of them (md, csv, latex, html, json, figures, "
                          f"all), not {type(formats).__name__}.")
    listed = list(formats)
    wrong = next((f for f in listed if not isinstance(f, str)), None)
    if wrong is not None:
        raise ReportError(f"formats must be format names (md, csv, latex, html, json, figures, all), not {wrong!r}.")
    return set(listed)


# --------------------------------------------------------------------------- translations


def target_languages(values: Iterable[str]) -> list[str]:
    """Language codes from ``values`` (each may be a comma-separated list), checked and deduplicated.

    Raises ``TranslationError`` for a code that is not one, and for English (the source language)."""
    from promptgrid.errors import TranslationError
    from promptgrid.languages import base_language, language_problem

    out: list[str] = []
    for value in [values] if isinstance(values, str) else values:
        if not isinstance(value, str):
            raise TranslationError(f"languages must be language codes such as de or ja, not {value!r}.")
        for code in value.split(","):
            code = code.strip()
            if not code:
                continue
            problem = language_problem(code)
            if problem:
                raise TranslationError(f"{problem}.")
            if base_language(code) == "en":
                raise TranslationError("English is the source language; choose target languages such as de,ja")
            out.append(code)
    return list(dict.fromkeys(out))


@dataclass(frozen=True)
class TranslationChecks:
    """What ``check_translations`` found: one ``Finding`` per translation checked (or missing), and the
    catalogs whose stale and missing checks could not run (their dataset could not be loaded)."""

    findings: list[Finding]
    """``promptgrid.translate.Finding``: language, kind, origin (catalog file:line or ``store:...``), key,
    ok, problems (check codes) and detail."""
    skipped: list[str]
    """One line per catalog whose English source could not be loaded, saying why."""

    @property
    def ok(self) -> bool:
        """No translation failed a check."""
        return all(f.ok for f in self.findings)

    @property
    def failures(self) -> list[Finding]:
        return [f for f in self.findings if not f.ok]

    def __repr__(self) -> str:  # one line: the findings list can run to thousands of records (a notebook cell)
        languages = sorted({f.language for f in self.findings})
        return (f"TranslationChecks({len(self.findings):,} findings, {len(self.failures):,} failed, "
                f"{len(self.skipped)} catalogs skipped; languages {languages})")


def check_translations(
    languages: Iterable[str] | None = None,
    *,
    store: PathLike | None = None,
    back_translate: str | None = None,
    bfcl_data: PathLike | None = None,
    catalogs: Sequence[TranslationCatalog] | None = None,
    on_retry: Callable[[str], None] | None = None,
) -> TranslationChecks:
    """Check the shipped catalogs and the translations in a translation store (``promptgrid check-translations``).

    ``languages``: codes to check (``["de", "ja"]`` or ``"de,ja"``; default: all). ``store``: the translation
    store (default: the user's, read-only; one named must exist). ``back_translate``: a backend
    (``amazon``, ``llm:MODEL``) to also score back-translation similarity. ``bfcl_data``: where bfcl-eval's
    data is, for the catalogs of its wording. ``catalogs``: check these instead of the shipped ones.
    ``on_retry``: called with one line when the back-translation backend retries a request.
    Each translation gets the checks of ``check-translation`` (placeholders, tags, protected names, markup,
    language, untranslated, length, structure); catalogs are also checked for stale and missing entries.
    Returns the findings; raises ``TranslationError`` for a bad language code or a store that does not exist,
    ``TranslationStoreError`` for one that is not a readable translation store.
    """
    from promptgrid.errors import TranslationError
    from promptgrid.translate._backends import make_backend
    from promptgrid.translate._catalogs import shipped_catalogs
    from promptgrid.translate._store import TranslationStore
    from promptgrid.translate._units import Unit, UnitKind, description_units, instruction_units
    from promptgrid.translate._verify import check_catalog, check_store

    langs = set(target_languages(languages)) if languages is not None else None
    if store is not None:
        _path(store, "store", TranslationError)
    bfcl = None if bfcl_data is None else os.fspath(_path(bfcl_data, "bfcl_data", TranslationError))
    back = make_backend(back_translate, on_retry=on_retry, clients=_clients) if back_translate else None
    # Shipped catalogs must cover the built-in English catalogs; entries for bfcl-eval's
    # experimental_bfcl wording are allowed (not stale) but not required.
    required = [u.key for u in instruction_units()]
    instructions = {u.key: u for u in instruction_units(include_bfcl=True, bfcl_data=bfcl)}
    the_store = TranslationStore(store, readonly=True)
    try:
        if store is not None and not the_store.path.is_file():
            raise TranslationError(f"translation store {the_store.path} does not exist")
        len(the_store)  # a damaged or foreign store is refused before the catalogs are checked
        english_of: dict[str, dict[str, Unit] | None] = {}
        skipped: list[str] = []
        findings: list[Finding] = []
        for catalog in shipped_catalogs() if catalogs is None else catalogs:
            if langs is not None and catalog.language not in langs:
                continue
            english: dict[str, Unit] | None = instructions
            if catalog.kind is not UnitKind.INSTRUCTIONS:
                dataset = catalog.dataset
                if dataset is not None and dataset not in english_of:
                    try:
                        english_of[dataset] = {u.key: u for u in description_units(_dataset_functions(dataset, bfcl))}
                    except (PromptgridError, OSError) as exc:  # the dataset is optional for this check
                        english_of[dataset] = None
                        skipped.append(f"cannot load dataset {dataset!r} ({exc}); stale/missing checks skipped "
                                       f"for {catalog.path}")
                english = english_of.get(dataset) if dataset is not None else None
            findings.extend(check_catalog(catalog, english, back_translator=back,
                                          required=required if catalog.kind is UnitKind.INSTRUCTIONS else None))
        findings.extend(check_store(the_store, langs, back_translator=back))
    finally:
        the_store.close()
    return TranslationChecks(findings, skipped)


def _dataset_functions(dataset: str, bfcl_data: Any) -> list[dict[str, Any]]:
    """Every function doc a dataset offers: its cases' docs, or, for a conversation dataset (``mini-mt``,
    ``bfcl:multi_turn_*``), the docs of its English conversations at their last turn (held-out docs included)."""
    from promptgrid.matrix.episodes import kind_of_dataset

    return kind_of_dataset(dataset).functions(dataset, bfcl_data)


# --------------------------------------------------------------------------- running


def _config(function: Callable[..., Any], grid: Grid | PathLike | RunConfig, dataset: str | None,
            options: RunOptions) -> RunConfig:
    if not isinstance(grid, (Grid, RunConfig, str, os.PathLike)):
        raise RunError(f"grid must be a Grid, a grid name or path, a run-config path or a RunConfig, "
                       f"not {type(grid).__name__}.")
    check_keywords(options, RunOptions, f"{function.__name__}()", also=function.__kwdefaults__ or ())
    return build_config(grid, dataset, **options)


_RUN_OPTIONS_DOC = "Options (``RunOptions``: the flags of ``promptgrid run``, and most of them run config keys):"


@takes_options(RunOptions, _RUN_OPTIONS_DOC)
def run(grid: Grid | PathLike | RunConfig, dataset: str | None = None, *, retry_errors: bool = False,
        append: bool = False, progress: bool = False, batch: bool = False, batch_wait: bool = True,
        batch_poll_s: float = 30.0, **options: Unpack[RunOptions]) -> Run:
    """Send every (model, variant, case, repeat) not yet answered in the run directory, score and store the answers.

    ``grid``: a ``Grid``, a grid name or YAML path, or a run-config YAML
    path or ``RunConfig`` (its values are the defaults of the options).
    ``dataset``: any dataset spec: single-turn (``mini``, ``mini:de,ja``, ``bfcl:<category>``,
    ``jsonl:PATH``) or conversations (``bfcl:multi_turn_*``, ``mini-mt``, ``mini-mt:LANGS``, a ``jsonl:``
    file of conversations). The options below (``RunOptions``) choose the models and
    the jobs and say how they are sent; a keyword that is none of them is a
    ``RunError`` naming the closest. ``retry_errors`` sends again the calls
    that ended in an error before (errors are final otherwise).
    A ``run_dir`` that holds another grid's or dataset's results is refused
    (``RunError``) before any call; ``append=True`` combines them on purpose.
    ``batch=True`` sends the new calls through each model's batch API
    (OpenAI-compatible files + batches, Bedrock batch inference; see
    ``promptgrid.matrix.running.batch``) at the batch price, and polls every
    ``batch_poll_s`` seconds until every batch is collected, or returns once
    they are submitted with ``batch_wait=False`` (``status`` or calling
    ``run`` again collects them).
    Each call is recorded in ``run_dir/run.json`` (``Run.config["invocations"]``).

    Resumable: calling it again sends only what has no result yet. Prints
    nothing unless ``progress``. Raises ``PromptgridError`` subclasses on bad
    input (``RunError``, ``GridError``, ``DatasetError``, ...). Inside a
    running event loop it runs on a worker thread; Ctrl-C (KeyboardInterrupt)
    while waiting stops it cleanly (``summary.stopped == "interrupted"``).

    A conversation dataset is run episode by episode (``promptgrid.matrix.conversations``) and gives a
    ``ConversationRun``: ``.path``, ``.summary`` (``ConversationRunSummary``), ``.results()`` (the
    episodes), ``.to_pandas()`` (one row per episode, per-turn columns), ``.spend()``, ``.report()`` (pass^k,
    per turn, failure modes). The options mean what they mean above (``concurrency``: episodes at a time per
    model; ``rpm``/``tpm``: every step is paced; ``max_cost``: no new step once the run directory's spend
    reaches it, unfinished episodes stored and resumed by the next call, ``summary.stopped == "max_cost"``);
    ``goal``/``budget`` plan (variant, conversation, repeat) episodes as a single-turn run plans jobs
    (``.adaptive()`` says what the goal found); ``batch`` sends new steps in provider batches, one round at a time
    (the next step of every live episode; ``batch_poll_s`` between polls; ``batch_wait=False`` is refused: each
    round needs the last one's answers); ``retry_errors`` plays again the episodes a step's error ended (an
    error is a result counted as failed otherwise, as a failed single-turn call is); ``append`` changes nothing (a
    conversation run directory keeps every variant's episodes); nothing goes to ``run.json``. Ctrl-C stops it
    cleanly, as a single-turn run (``summary.stopped == "interrupted"``; every answer received is stored; calling
    it again resumes).
    """
    from promptgrid.matrix.episodes import kind_of_dataset

    config = _config(run, grid, dataset, options)
    return kind_of_dataset(config.dataset).run(config, grid, progress=progress, retry_errors=retry_errors,
                                               append=append, batch=batch, batch_wait=batch_wait,
                                               batch_poll_s=batch_poll_s)


@takes_options(RunOptions, _RUN_OPTIONS_DOC)
def estimate(grid: Grid | PathLike | RunConfig, dataset: str | None = None, *, append: bool = False,
             **options: Unpack[RunOptions]) -> PlanEstimate:
    """What ``run`` with the same arguments would send and cost, calling no model (``promptgrid run --dry-run``).

    Returns a ``PlanEstimate`` (``promptgrid.matrix.running.estimate``): per model (``.models``, each a
    ``ModelEstimate``), the jobs, those already stored in the run directory, those sharing a prompt, the calls to send
    with their estimated input tokens (characters / 4, a native request's tool schemas included), the most output
    ``max_tokens`` allows, the cost at litellm's online and batch prices (``None`` when unknown), the jobs the model
    cannot be sent (``unsupported``) and the credential variables not set (``missing_env``); totals as properties. An
    adaptive ``goal`` scales the product's counts to its budget (``ModelEstimate.product``). For a conversation dataset
    (``kind == "conversation"``) the jobs are episodes and the calls steps, counted on the ground truth's path (each
    pair played offline by ``fake/ground-truth``: a floor, as a model that errs takes more steps). What ``run`` would
    refuse (a run directory of another grid or kind, a plan past ``max_jobs``) raises ``RunError`` here too; nothing is
    written.
    """
    from promptgrid.matrix.episodes import kind_of_dataset

    config = _config(estimate, grid, dataset, options)
    return kind_of_dataset(config.dataset).estimate(config, append=append)


@takes_options(RunOptions, _RUN_OPTIONS_DOC)
async def arun(grid: Grid | PathLike | RunConfig, dataset: str | None = None, *, retry_errors: bool = False,
               append: bool = False, progress: bool = False, batch: bool = False, batch_wait: bool = True,
               batch_poll_s: float = 30.0, **options: Unpack[RunOptions]) -> Run:
    """``run``, awaited in the caller's event loop (same options, same result: a ``Run``, or a
    ``ConversationRun`` for a conversation dataset)."""
    from promptgrid.matrix.episodes import kind_of_dataset

    config = _config(arun, grid, dataset, options)
    return await kind_of_dataset(config.dataset).arun(config, grid, progress=progress, retry_errors=retry_errors,
                                                      append=append, batch=batch, batch_wait=batch_wait,
                                                      batch_poll_s=batch_poll_s)


@takes_options(RunOptions, _RUN_OPTIONS_DOC)
def run_conversations(grid: Grid | PathLike | RunConfig, dataset: str | None = None, *, batch: bool = False,
                      progress: bool = False, **options: Unpack[RunOptions]) -> Run:
    """Take every (model, variant, conversation, repeat) of a conversation dataset through its turns; store, score.

    What ``run`` does with a conversation dataset (kept for code written before ``run`` took them), and a
    ``DatasetError`` for a single-turn one. ``dataset``: ``bfcl:multi_turn_base`` (``_miss_func``,
    ``_miss_param``, ``_long_context``), ``mini-mt`` or ``jsonl:PATH`` of conversations
    (docs/conversations.md). Every answer is stored as it arrives, so calling
    it again resumes mid-episode and sends nothing twice. ``--repeats k``
    gives pass^k (``ConversationRun.report``). ``batch=True`` sends new steps in provider batches, a round at
    a time (as ``run``); an adaptive ``goal`` plans episodes; ``rpm``/``tpm`` pace every step and
    ``max_cost`` caps the run directory's spend, as in a single-turn run. Model strings as for ``run``, plus
    the offline scripted models ``fake/ground-truth``, ``fake/noisy`` (``fake/noisy:SEED``) and ``fake/hostile``.
    """
    from promptgrid.matrix.episodes._conversation import CONVERSATION

    config = _config(run_conversations, grid, dataset, options)
    return CONVERSATION.run(config, grid, progress=progress, retry_errors=False, append=False, batch=batch,
                            batch_wait=True, batch_poll_s=30.0)


def translate_conversations(
    dataset: str,
    to: str | Iterable[str],
    backend: str | TranslationBackend,
    *,
    out: PathLike | None = None,
    what: str = "all",
    store: PathLike | None = None,
    bfcl_data: PathLike | None = None,
    region: str | None = None,
    formality: str | None = None,
    timeout: float | None = None,
    on_retry: Callable[[str], None] | None = None,
    progress: Callable[[str], None] | None = None,
) -> ConversationTranslations:
    """Translate the conversations of ``dataset`` into each language of ``to`` (``promptgrid translate
    --conversations-out``).

    ``dataset``: ``bfcl:multi_turn_*``, ``jsonl:PATH`` or ``mini-mt``; ``to``: ``"de,ja"`` or ``["de", "ja"]``;
    ``backend``: ``amazon``, ``llm:MODEL`` or ``catalog[:PATH]``, or a ``promptgrid.translate.TranslationBackend``
    object of your own (``name`` and ``translate(texts, source, target)``). The user turns are translated, and the
    function descriptions unless ``what="instructions"``; every turn's protected values (the names, ids and
    numbers the state and the ground truth use) are masked, and one that does not come back is a finding of
    its turn (docs/conversations.md). Every segment the backend returns is kept in the translation ``store``
    (default: the user's, ``promptgrid translate``'s) as its batch comes back, so a run that fails part-way
    loses nothing it paid for and a run again sends only what is not stored. ``out``: write the translations
    there as ``jsonl:`` records (atomically; a path that is an input, a run's store or a directory is refused
    before anything is sent). ``on_retry``: called with one line when the backend retries; ``progress``: with
    each language as it finishes. Raises ``TranslationError`` (bad language, backend failure),
    ``OutputError`` for ``out``, ``DatasetError`` for the dataset.
    """
    from promptgrid.errors import TranslationError
    from promptgrid.matrix.datasets._conversation_translations import WHAT
    from promptgrid.matrix.datasets._conversation_translations import ConversationTranslations as _Made
    from promptgrid.matrix.datasets._conversations import dataset_files, load_conversations
    from promptgrid.matrix.datasets._translate_conversations import TranslationUsage
    from promptgrid.matrix.datasets._translate_conversations import translate_conversations as _translate
    from promptgrid.safeio import check_output
    from promptgrid.translate._pipeline import _require_coverage
    from promptgrid.translate._store import TranslationStore

    if not isinstance(dataset, str) or not dataset:
        raise TranslationError(f"dataset must be a dataset spec such as bfcl:multi_turn_base, not {dataset!r}.")
    if what not in WHAT:
        raise TranslationError(f"what must be one of {', '.join(WHAT)}, not {what!r}.")
    targets = target_languages(to)
    if not targets:
        raise TranslationError("no target language: give at least one, e.g. to='de,ja' (--to de,ja).")
    inputs = dataset_files(dataset)
    path = None if out is None else _path(out, "out", TranslationError).expanduser()
    if path is not None:
        check_output(path, inputs=inputs)  # before any translation is paid for
    bfcl = None if bfcl_data is None else _path(bfcl_data, "bfcl_data", TranslationError)
    engine = _backend(backend, "backend", region=region, formality=formality, timeout=timeout, on_retry=on_retry)
    _require_coverage(engine, targets)  # a catalog without the language: the error that says what to use instead
    sources = load_conversations(dataset, bfcl_data=bfcl)
    usage = TranslationUsage()
    keep = bool(getattr(engine, "masks", True))  # catalogs are looked up, not paid for: nothing to keep
    the_store = (TranslationStore(None if store is None else _path(store, "store", TranslationError))
                 if keep else None)
    translated: list[Any] = []
    findings: list[Any] = []
    counts: dict[str, int] = {}
    try:
        for target in targets:
            results = _translate(sources, engine, target, descriptions=what != "instructions", store=the_store,
                                 usage=usage)
            for source, result in zip(sources, results, strict=True):
                translated.append(result.conversation)
                findings.extend(_translation_findings(source, result, target))
            counts[target] = len(results)
            if progress is not None:
                progress(target)
    finally:
        if the_store is not None:
            the_store.close()
    if path is not None:
        _write_conversations(path, inputs, translated)
    return _Made(tuple(translated), tuple(findings), counts, usage.sent, usage.stored,
                 str(getattr(engine, "name", backend)), path, the_store.path if the_store is not None else None)


def _translation_findings(source: Conversation, result: TranslatedConversation, target: str
                          ) -> list[ConversationFinding]:
    """The findings of one translated conversation: the problems its translation reported that the check does
    not find again, then the check's (``check_conversation_translation`` against its source)."""
    from promptgrid.matrix.datasets._translate_conversations import check_conversation_translation

    checked = check_conversation_translation(source, result.conversation, "en", target)
    said = {(f.turn, f.code) for f in checked}  # a value lost in translation is found again by the check
    return [*(f for f in result.problems if (f.turn, f.code) not in said), *checked]


def _write_conversations(path: Path, inputs: Sequence[Path], conversations: Sequence[Conversation]) -> None:
    """Write ``conversations`` to ``path`` as ``jsonl:`` records, atomically (never over one of ``inputs``)."""
    from promptgrid.matrix.datasets._conversations import conversation_to_record
    from promptgrid.safeio import atomic_output

    records = "".join(json.dumps(conversation_to_record(c), ensure_ascii=False) + "\n" for c in conversations)
    try:
        with atomic_output(path, inputs=inputs) as fh:
            fh.write(records)
    except OSError as exc:  # atomic_output says what it can as OutputError; this is what it leaves through
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from exc


def check_conversation_translations(
    datasets: str | Iterable[str],
    languages: str | Iterable[str] | None = None,
    *,
    back_translate: str | TranslationBackend | None = None,
    bfcl_data: PathLike | None = None,
    on_retry: Callable[[str], None] | None = None,
) -> ConversationChecks:
    """Check translated conversations turn by turn against their English sources (``promptgrid
    check-translations --dataset``).

    ``datasets``: conversation datasets holding the English conversations and their translations (``mini-mt``;
    ``["bfcl:multi_turn_base", "jsonl:de.jsonl"]``); they pair by template id. ``languages``: only these
    (default: every language found). ``back_translate``: a backend (``amazon``, ``llm:MODEL``, or an object as for
    ``translate_conversations``) that also
    translates every translated turn and description back into English and scores the similarity
    (``back_translation_low``). Returns ``ConversationChecks`` (``ok``, findings per language); raises
    ``TranslationError`` when there is nothing translated to check.
    """
    from promptgrid.errors import TranslationError
    from promptgrid.matrix.datasets._conversation_translations import ConversationChecks as _Checks
    from promptgrid.matrix.datasets._conversations import load_conversations
    from promptgrid.matrix.datasets._translate_conversations import check_conversation_set, conversation_language

    specs = [datasets] if isinstance(datasets, str) else list(datasets) if isinstance(datasets, Iterable) else None
    if specs is None or not all(isinstance(spec, str) for spec in specs):
        raise TranslationError(f"datasets={datasets!r} must be a dataset spec or a list of them, e.g. 'mini-mt' or "
                               "['bfcl:multi_turn_base', 'jsonl:de.jsonl'].")
    if not specs:
        raise TranslationError("no dataset to check: give the English conversations and their translations, e.g. "
                               "['bfcl:multi_turn_base', 'jsonl:de.jsonl'] (--dataset ... --dataset ...), or "
                               "'mini-mt'.")
    langs = set(target_languages(languages)) if languages is not None else None
    bfcl = None if bfcl_data is None else _path(bfcl_data, "bfcl_data", TranslationError)
    by_language: dict[str, list[Any]] = {}
    for spec in specs:
        for conversation in load_conversations(spec, bfcl_data=bfcl):
            by_language.setdefault(conversation_language(conversation), []).append(conversation)
    if langs:
        by_language = {lang: c for lang, c in by_language.items() if lang == "en" or lang in langs}
    if not [lang for lang in by_language if lang != "en"]:
        raise TranslationError(f"{', '.join(specs)} holds no translated conversations to check; give the "
                               "English sources and their translations, e.g. --dataset bfcl:multi_turn_base "
                               "--dataset jsonl:de.jsonl, or --dataset mini-mt")
    back = _backend(back_translate, "back_translate", on_retry=on_retry) if back_translate else None
    results = check_conversation_set(by_language, back_translator=back)
    return _Checks(results, {lang: len(by_language[lang]) for lang in results})


def _backend(spec: Any, name: str, **options: Any) -> Any:
    """A translation backend: made from its spec string (``make_backend``), or an object used as it is."""
    from promptgrid.errors import TranslationError
    from promptgrid.translate._backends import make_backend

    if isinstance(spec, str):
        return make_backend(spec, clients=_clients, **options)
    if not (isinstance(getattr(spec, "name", None), str) and callable(getattr(spec, "translate", None))):
        raise TranslationError(f"{name} must be a backend spec (amazon, llm:MODEL, catalog[:PATH]) or an object with "
                               f"a name and translate(texts, source, target), not {type(spec).__name__}.")
    return spec


def _clients(name: str, **options: Any) -> Any:
    """A translation backend's model client, made as a run makes it (``llm:local/...``, ``llm:openai/x``)."""
    from promptgrid.matrix.clients import make_client

    return make_client(name, **options)


def open_conversation_run(path: PathLike) -> Run:
    """A conversation run directory (``run``'s ``run_dir``) as a ``Run``; ``RunError`` when it holds none."""
    from promptgrid.matrix.running.conversation_reader import ConversationReader

    ConversationReader(_path(path, "path"))  # the conversation run's own error for a directory that holds none
    return Run(path)
