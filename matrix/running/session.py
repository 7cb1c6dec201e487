"""One run as a library: options -> ``RunConfig`` -> ``Prepared`` -> ``RunSummary`` in the run directory.

- ``build_config``: a grid (or a run-config YAML, or a ``RunConfig``) and the
  run options -> ``RunConfig``. ``promptgrid run``'s flags and
  ``promptgrid.run``'s keywords are the same options, merged here once;
- ``prepare``: load the grid and the dataset, select variants and cases,
  build the renderer and render every variant once, so a template or
  catalog error stops the run before any call;
- ``execute``: lock the run directory, check that it belongs to this grid
  and dataset (``check_run_dir``), open the store, run, append the
  invocation to ``run.json``; returns the ``RunSummary``;
- ``rescore``: score the stored responses again (no model call).

Nothing here prints (the progress line on stderr only when asked for), and
nothing returns an exit code: how a run stopped (``max_cost``, interrupted, a
model halted by an error every call would repeat) is in its ``RunSummary``;
bad input raises a ``PromptgridError``.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import gc
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from typing_extensions import Unpack

from promptgrid.errors import PromptgridError, RunError, StoreError, closest
from promptgrid.matrix.clients import provider_of
from promptgrid.providers import CallError, RetryPolicy, one_line
from promptgrid.records import Case
from promptgrid.safeio import parse_json_line, read_text_bounded
from promptgrid.variants import Grid, Variant, load_grid
from promptgrid.variants._yaml import MAX_GRID_BYTES, read_yaml_text

from .config import (
    _SECRET_KEYS,
    DEFAULT_CONCURRENCY,
    GOALS,
    PARAM_BOUNDS,
    ModelSpec,
    RunConfig,
    RunOptions,
    default_run_dir,
    load_run_config,
    model_params,
    number_problem,
    retry_policy,
)
from .connection import LOCK_FILE, RunLock, disk_full_errors
from .ledger import disk_full_stop
from .options import check_keywords, declared
from .plan import MAX_JOBS, check_plan_size
from .store import RUN_JSON, STORE_FILE, UNSUPPORTED, RunStore, stored_records

__all__ = ["RUN_JSON", "RUN_JSON_VERSION", "Plan", "Prepared", "RunIdentity", "build_config", "check_run_dir",
           "execute", "has_store", "is_run_config", "last_invocation", "make_renderer", "model_counts", "plan_status",
           "prepare", "read_run_json", "refresh_pending", "rescore"]

RUN_JSON_VERSION = 2
"""2: every invocation keeps its own config, grid, dataset, models and pending count (1 kept only the last config)."""
GC_YOUNG = 10_000
"""The cyclic GC's first threshold while a run sends (CPython's default is 700): fewer young collections, each of
which also walks the objects of every call in flight. Measured (1,040 calls to the fake server, 64 in flight):
0.14-0.21 -> 0.08 ms of collection per call, peak RSS of the 100k-job memory benchmark unchanged."""
# Keys that would put a secret into run.json, or that are not generation parameters.
_NOT_PARAMS = (*_SECRET_KEYS, "api_base", "timeout", "max_retries", "num_retries")


# --------------------------------------------------------------------------- config


def is_run_config(ref: str | os.PathLike[str]) -> bool:
    """A YAML with ``models`` or ``dataset`` at the top is a run config; anything else is a grid."""
    ref = os.fspath(ref)
    if not ref.endswith((".yaml", ".yml")) or not Path(ref).is_file():
        return False
    import yaml

    # Only the top-level keys are looked at, on the composed (not constructed, not alias-expanded) file, so a
    # hostile file is classified without being read further; the loader then reports its problem with the line.
    try:
        root = yaml.compose(read_yaml_text(Path(ref), ref, RunError, MAX_GRID_BYTES), Loader=yaml.SafeLoader)
    except (RunError, yaml.YAMLError, RecursionError):
        return False  # let the grid loader report it with its line
    keys = {k.value for k, _ in root.value if isinstance(k, yaml.ScalarNode)} \
        if isinstance(root, yaml.MappingNode) else set()
    return "models" in keys or "dataset" in keys


def _default_concurrency(name: str) -> int:
    # One llama context generates one answer at a time; more workers would only queue.
    return 1 if name.startswith("local/") else DEFAULT_CONCURRENCY


def _config_fields(config: RunConfig) -> dict[str, Any]:
    """A ``RunConfig`` as the dict ``load_run_config`` returns (so options merge over it the same way): every
    field, the models as dicts of ``ModelSpec`` fields."""
    out = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    out["models"] = [m.to_dict() for m in config.models]
    return out


def _grid_ref(grid: Grid) -> str:
    """What ``RunConfig.grid`` records for a loaded grid: its name if built in, else its file."""
    return grid.name if grid.source.startswith("<builtin>") else grid.source


def build_config(grid: str | os.PathLike[str] | Grid | RunConfig, dataset: str | None = None,
                 **options: Unpack[RunOptions]) -> RunConfig:
    """Merge a run config (when ``grid`` is a run-config YAML or a ``RunConfig``) with the run options
    (``RunOptions``; options win) into the ``RunConfig``.

    ``models`` replaces the config's models; the options of every model (``RunOptions`` fields declared
    ``model=True``: ``api_base``, ``constraints``, ``concurrency``, ``rpm``, ``tpm``, ``timeout``, ``params``)
    apply over each model's own (``constraints`` to litellm models only); ``max_jobs`` caps the plan
    (``plan.MAX_JOBS``; checked here for models x repeats, by ``prepare`` for the whole plan). ``params["seed"]``
    also seeds an adaptive run's planner (``RunConfig.plan_seed``). Raises ``RunError`` naming the option.
    """
    given: dict[str, Any] = dict(options)
    check_keywords(given, RunOptions, "build_config")
    base = _base_fields(grid)
    if dataset is not None:
        base["dataset"] = dataset
    for key, option in _OPTIONS.items():  # the run's own options (the models' are merged per model below)
        value = given.get(key)
        if option.model or key == "models" or value is None or (option.many and not value):
            continue
        base[key] = tuple(value) if option.many else os.fspath(value) if isinstance(value, os.PathLike) else value
    if not base.get("dataset"):
        raise RunError("no dataset: give one (mini, bfcl:simple_python, jsonl:PATH, ...; --dataset on the "
                       "command line) or name one in the run config.")
    _check_run_options(base)
    repeats_ = base.get("repeats") or 1
    overrides = dict(given.get("params") or {})
    bad = [k for k in overrides if k.lower() in _NOT_PARAMS]
    if bad:
        raise RunError(f"params: {bad[0]!r} is not a generation parameter. Give api_base and timeout as their own "
                       "options, and keys only through an environment variable (api_key_env in a run config).")
    limits = {key: given.get(key) for key in _MODEL_BOUNDS}
    specs = [_model_spec(m, given.get("api_base"), overrides, repeats_, given.get("constraints"), **limits)
             for m in _models(given.get("models"), base)]
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise RunError(f"a model is named twice: {', '.join(names)}.")
    if overrides.get("seed") is not None:
        base["plan_seed"] = overrides["seed"]  # checked with the models' params
    out_dir = Path(base["run_dir"]) if base.get("run_dir") else default_run_dir(base["grid"], base["dataset"])
    fields = {k: base[k] for k in _OTHER_FIELDS if base.get(k) is not None}
    check_plan_size(len(specs), repeats_, max_jobs=fields.get("max_jobs", MAX_JOBS))  # before the grid is read
    return RunConfig(grid=base["grid"], dataset=base["dataset"], models=tuple(specs), run_dir=out_dir,
                     repeats=repeats_, **fields)


def _base_fields(grid: str | os.PathLike[str] | Grid | RunConfig) -> dict[str, Any]:
    """What the options merge over: a ``RunConfig``'s fields, a run config file's values, or just the grid."""
    if isinstance(grid, RunConfig):
        return _config_fields(grid)
    if isinstance(grid, Grid):
        return {"grid": _grid_ref(grid)}
    if is_run_config(grid):
        return load_run_config(grid)
    return {"grid": os.fspath(grid)}


def _check_run_options(base: Mapping[str, Any]) -> None:
    """Refuse a merged run option out of its bounds or choices, or an adaptive run missing one of its options."""
    for key, bounds in _RUN_BOUNDS.items():
        if base.get(key) is not None:
            _checked(key, base[key], **bounds)
    for key, choices in _RUN_CHOICES.items():
        if base.get(key) is not None and base[key] not in choices:
            raise RunError(f"{key} {base[key]!r} is not one of {', '.join(choices)} ({_flag(key)})."
                           f"{closest(str(base[key]), choices)}")
    problem = _adaptive_problem(base.get("goal"), base.get("budget"), base.get("rounds"))
    if problem:
        raise RunError(problem)


_OPTIONS = declared(RunOptions)
# Bounds and choices of the run options (flags, pg.run keywords, run-config values), as RunOptions declares them;
# each is refused with its option named, so nan, inf and negatives never reach the runner. The models' own
# limits (concurrency, rpm, tpm, timeout) are checked per model, after the merge.
_RUN_BOUNDS: dict[str, Mapping[str, Any]] = {k: o.bounds for k, o in _OPTIONS.items() if o.bounds and not o.model}
_RUN_CHOICES: dict[str, tuple[str, ...]] = {k: o.choices for k, o in _OPTIONS.items() if o.choices and not o.model}
_MODEL_BOUNDS: dict[str, Mapping[str, Any]] = {k: o.bounds for k, o in _OPTIONS.items() if o.bounds and o.model}
# RunConfig's fields besides those build_config sets itself, taken from the merged config when given.
_OTHER_FIELDS = tuple(f.name for f in dataclasses.fields(RunConfig)
                      if f.name not in ("grid", "dataset", "models", "run_dir", "repeats"))


def _flag(key: str) -> str:
    """The flag of a run option (``--max-cost``), or of a generation parameter (``--max-tokens``)."""
    option = _OPTIONS.get(key) or _OPTIONS["params"].keys.get(key)
    return option.flag if option is not None and option.flag else f"--{key.replace('_', '-')}"


def _adaptive_problem(goal: Any, budget: Any, rounds: Any) -> str | None:
    """What is missing from an adaptive run's options (``goal`` with ``budget``; ``rounds`` only with them)."""
    if goal is None and budget is not None:
        return (f"budget {budget} (--budget) is the jobs per model of an adaptive run: give --goal "
                f"({', '.join(GOALS)}) too, or leave budget out to run every job.")
    if goal is None and rounds is not None:
        return (f"rounds {rounds} (--rounds) applies to an adaptive run: give --goal ({', '.join(GOALS)}) and "
                "--budget too, or leave rounds out.")
    if goal is not None and budget is None:
        return f"goal {goal} (--goal) plans a budget of jobs per model: give --budget N too."
    return None


def _checked(key: str, value: Any, **bounds: Any) -> Any:
    """``value`` if it is within ``bounds`` (see ``number_problem``), else a ``RunError`` naming the option."""
    problem = number_problem(value, **bounds)
    if problem:
        raise RunError(f"{key} {problem} ({_flag(key)}).")
    return value


def _models(models: Iterable[str | ModelSpec] | None, base: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The models to run, as dicts of ``ModelSpec`` fields: the given ones, else the run config's."""
    if isinstance(models, str):
        raise RunError(f"models must be a list of model strings, e.g. [{models!r}].")
    if models is not None and not isinstance(models, Iterable):
        raise RunError(f"models must be a list of model strings or ModelSpecs, not {type(models).__name__}.")
    listed = list(models or ())
    for i, m in enumerate(listed):
        if not isinstance(m, ModelSpec) and not (isinstance(m, str) and m.strip()):
            raise RunError(f"models[{i}] is {m!r}: each model must be a model string (openai/gpt-4o-mini, "
                           "local/smollm2-135m, fake/auto) or a ModelSpec.")
    given = [m.to_dict() if isinstance(m, ModelSpec) else {"name": m} for m in listed]
    if given:
        return given
    if base.get("models"):
        return [dict(m) for m in base["models"]]
    raise RunError("no model: give one (e.g. openai/gpt-4o-mini, local/smollm2-135m, fake/auto; --model on the "
                   "command line) or list models in the run config.")


def _api_bases(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """One URL or a list of them as the tuple ``ModelSpec.api_bases`` holds (checked there)."""
    if not value:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def _check_params(params: Mapping[str, Any]) -> None:
    """Refuse a generation parameter out of its bounds (``PARAM_BOUNDS``), naming its option."""
    for key, value in params.items():
        if key in PARAM_BOUNDS and value is not None:
            _checked(key, value, **PARAM_BOUNDS[key])


def _model_spec(m: Mapping[str, Any], api_base: str | Sequence[str] | None, params: Mapping[str, Any], repeats: int,
                constraints: str | None = None, **limits: Any) -> ModelSpec:
    """One model's spec: its own values, then the options given for every model (options win)."""
    merged = {**dict(m.get("params") or {}), **{k: v for k, v in params.items() if v is not None}}
    _check_params(merged)
    spec: dict[str, Any] = {"name": m["name"], "params": model_params(merged, repeats),
                            "api_bases": _api_bases(api_base) or _api_bases(m.get("api_bases") or m.get("api_base")),
                            "api_key_env": m.get("api_key_env"),
                            "concurrency": _default_concurrency(m["name"])}
    if m.get("concurrency") is not None:
        spec["concurrency"] = _checked("concurrency", m["concurrency"], **_MODEL_BOUNDS["concurrency"])
    for key in ("rpm", "tpm", "timeout"):
        if m.get(key) is not None:
            spec[key] = float(_checked(key, m[key], **_MODEL_BOUNDS[key]))
    if m.get("batch"):
        spec["batch"] = dict(m["batch"])
    if constraints is not None and provider_of(m["name"]) == "litellm":
        spec["constraints"] = constraints  # checked by ModelSpec
    elif m.get("constraints") is not None:
        spec["constraints"] = m["constraints"]
    for key, value in limits.items():
        if value is not None:
            checked = _checked(key, value, **_MODEL_BOUNDS[key])
            spec[key] = checked if key == "concurrency" else float(checked)
    return ModelSpec(**spec)


# --------------------------------------------------------------------------- preparation


@dataclass(frozen=True)
class RunIdentity:
    """What a run belongs to: every variant id its grid expands to and every case id its dataset holds.

    The full sets, not the selection: a larger ``--limit``, fewer ``--variant``s,
    more models or repeats keep the same grid and dataset (``check_run_dir``).
    """

    grid: str
    """The grid as ``RunConfig.grid`` names it (built-in name or file)."""
    grid_variants: frozenset[str]
    dataset: str
    """The dataset spec."""
    dataset_cases: frozenset[str]
    grid_labels: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)
    """Variant id -> label, to name the variants in which two grids differ."""


@dataclass(frozen=True)
class Prepared:
    """A config resolved into variants, cases and a renderer (no model touched yet)."""

    config: RunConfig
    grid_name: str
    variants: Sequence[Variant]
    cases: Sequence[Case]
    renderer: Any
    """A ``promptgrid.templates.Renderer`` (anything with ``render(variant, case) -> Prompt``)."""
    identity: RunIdentity | None = None
    """The grid and dataset in full (``prepare`` sets it); None skips ``check_run_dir`` (a hand-built run)."""

    @property
    def product(self) -> int:
        """Jobs of the full product, per model: variants x cases x repeats."""
        return len(self.variants) * len(self.cases) * self.config.repeats

    @property
    def per_model(self) -> int:
        """Jobs planned per model: the product, or an adaptive run's budget (at most the product)."""
        budget = self.config.budget if self.config.goal is not None else None
        return self.product if budget is None else min(budget, self.product)

    @property
    def jobs(self) -> int:
        return self.per_model * len(self.config.models)


def make_renderer(variants: Iterable[Variant], *, template_dir: str | os.PathLike[str] | None = None,
                  translation_store: str | os.PathLike[str] | None = None, localization: Any = None,
                  bfcl_data: str | os.PathLike[str] | None = None) -> Any:
    """A ``Renderer`` for these variants: translations are read (catalogs + store) only when one needs them,
    or when a translation store is named (so a wrong path fails now). Its prompts carry ``request`` for
    native and constrained variants (``RequestRenderer``)."""
    from promptgrid.matrix.calling import RequestRenderer
    from promptgrid.templates import Renderer

    if localization is None and (translation_store is not None or any(
            v.instruction_language != "en" or v.description_language != "en" for v in variants)):
        from promptgrid.translate import default_localization

        localization = default_localization(store=translation_store)
    return RequestRenderer(Renderer(template_dir, localization, bfcl_data=bfcl_data))


def prepare(config: RunConfig, *, grid: Grid | None = None) -> Prepared:
    """Load the grid (unless given) and dataset, select variants and cases, build the renderer."""
    from promptgrid.matrix.datasets import load_dataset

    grid = grid if grid is not None else load_grid(config.grid)
    variants = grid.select(config.variants)
    dataset = load_dataset(config.dataset, bfcl_data=config.bfcl_data)
    selected = dataset.select(case_ids=list(config.cases) if config.cases else None, limit=config.limit)
    cases = tuple(selected.cases)
    if not cases:
        raise RunError(f"dataset {config.dataset!r} selects no cases; check cases / limit.")
    check_plan_size(len(config.models), config.repeats, len(variants), len(cases), max_jobs=config.max_jobs)
    renderer = make_renderer(variants, template_dir=grid.template_dir, translation_store=config.translation_store,
                             bfcl_data=config.bfcl_data)
    # Pre-flight: every variant once, so a template or catalog error stops the run before any call.
    for variant in variants:
        renderer.render(variant, cases[0])
    identity = RunIdentity(config.grid, frozenset(v.id for v in grid.variants), config.dataset,
                           frozenset(c.id for c in dataset.cases), {v.id: v.label for v in grid.variants})
    return Prepared(config, grid.name, variants, cases, renderer, identity)


def _clients(config: RunConfig | None, redactor: Any, models: Iterable[ModelSpec] | None = None, *,
             deferred: bool = False) -> dict[str, Any]:
    """A client per model of ``config`` (or of ``models``), loaded and checked (credentials named); ``deferred``:
    each made (and loaded) only when something uses it (a run with nothing to send)."""
    out: dict[str, Any] = {}
    for spec in (models if models is not None else config.models if config is not None else ()):
        if spec.api_key_env and not os.environ.get(spec.api_key_env):
            raise RunError(f"model {spec.name}: api_key_env {spec.api_key_env} is not set in the environment. "
                           f"Export it first: export {spec.api_key_env}=...")
        out[spec.name] = _DeferredClient(spec, redactor) if deferred else _client(spec, redactor)
    return out


def _client(spec: ModelSpec, redactor: Any) -> Any:
    from promptgrid.matrix.clients import make_client

    client = make_client(spec.name, api_base=spec.api_bases, api_key_env=spec.api_key_env, redactor=redactor,
                         constraints=spec.constraints)
    load = getattr(client, "load", None)
    if callable(load):
        load()  # a local model loads before the clock starts, and fails now if it cannot
    return client


class _DeferredClient:
    """A model's client made on first use: a rerun with nothing to send never imports litellm or loads a local
    model. Every attribute is the real client's, made then."""

    def __init__(self, spec: ModelSpec, redactor: Any) -> None:
        self._spec, self._redactor = spec, redactor
        self._made: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._made is None:
            self._made = _client(self._spec, self._redactor)
        return getattr(self._made, name)

    async def aclose(self) -> None:
        if self._made is not None:
            await self._made.aclose()


def _nothing_to_send(prep: Prepared, run_dir: Path, *, retry_errors: bool, batch: Any) -> bool:
    """Whether every job of this invocation's plan has a result in the run directory's store already (an
    adaptive goal, a batch run and ``retry_errors`` are never idle: they decide what to send as they go)."""
    if retry_errors or batch is not None or prep.config.goal is not None or not (run_dir / STORE_FILE).is_file():
        return False
    plan = Plan.of(_invocation(prep, append=False, retry_errors=False))
    if plan is None:
        return False
    try:
        with RunStore(run_dir, readonly=True) as store:
            return sum(pending for _jobs, pending in plan_status(store, plan).values()) == 0
    except StoreError:
        return False  # the run itself reports what is wrong with the store


# --------------------------------------------------------------------------- run


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def read_run_json(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The content of a run directory's ``run.json``; ``{}`` when there is none.

    Raises ``RunError`` naming the file when it is not a JSON object: a run
    never writes over a record it cannot read (its history would be lost).
    """
    path = Path(run_dir) / RUN_JSON
    try:
        data = parse_json_line(read_text_bounded(path))  # bounded: an archive may come from anyone
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise RunError(f"cannot read {path}: {exc}. Move it aside to run again (the results are in "
                       f"{STORE_FILE}, not in {RUN_JSON}).") from None
    if not isinstance(data, dict):
        raise RunError(f"{path} is not a run record (expected a JSON object). Move it aside to run again.")
    return data


def _recorded(data: Mapping[str, Any], key: str, config_key: str) -> list[str]:
    """The grids (or datasets) a ``run.json`` names: each invocation's, or the one config of a version-1 file."""
    names = [str(i[key]["ref"]) for i in data.get("invocations") or () if isinstance(i.get(key), dict)]
    config = data.get("config") or {}
    if not names and config.get(config_key):
        names = [str(config[config_key])]
    return list(dict.fromkeys(names))


def has_store(run_dir: str | os.PathLike[str]) -> bool:
    """Whether ``run_dir`` holds a store to check and read before a run (else the run creates one).

    Not when there is no ``store.sqlite3``, nor when it is the empty file a run
    killed while creating it leaves: 0 bytes, no ``-wal`` content (SQLite writes
    the first page as soon as the store is set up) and no ``run.json`` (a run
    writes it only once its store is made). Any other file is a store: opening
    it reports damage, e.g. an empty store beside a ``run.json``, whose results
    were lost.
    """
    path = Path(run_dir) / STORE_FILE
    if not path.is_file():
        return False
    wal = path.with_name(path.name + "-wal")
    return (path.stat().st_size > 0 or (wal.is_file() and wal.stat().st_size > 0)
            or (Path(run_dir) / RUN_JSON).exists())


def check_run_dir(prep: Prepared, *, append: bool = False) -> None:
    """Refuse to run another grid or dataset into a run directory that holds results of one (unless ``append``).

    The grid is compared by its variants, not its name: it is the same when
    the set of variant ids it expands to (ids spell out every dimension) is
    the set an invocation recorded in ``run.json`` (``grid.ids``), so a grid
    with one variant more or less, or another grid whose variants include the
    stored ones (``call_modes`` after ``demo``), is a change, refused with the
    variants it adds and lacks named. Records written before the ids were
    (and no ``run.json``) are judged by the store: every stored variant is one
    of the grid's and the grid has as many variants as a recorded one, or
    every variant this run selects is stored. The dataset is compared by case
    ids: the same when every stored case is one of its cases, or every case
    this run selects is stored. So the same command, a larger ``limit``, fewer
    ``variants``, more models or repeats resume or extend the directory, and
    an earlier command after ``append`` is the same again.
    A directory that holds a conversation study (``conversations.sqlite3``) is
    refused whatever ``append`` says: the two kinds are never stored together.
    Raises ``RunError`` naming ``run.json`` and both grids (datasets), and
    ``StoreError`` for a damaged store (also with ``append``): a run never
    writes into a store it cannot read. No store, or the empty file of a run
    killed as it created it (``has_store``), is a new run directory.
    """
    identity = prep.identity
    run_dir = Path(prep.config.run_dir)
    from promptgrid.matrix.episodes._guard import check_run_dir_kind

    check_run_dir_kind(run_dir, "single")  # also with append: the kinds cannot be combined
    if identity is None or not has_store(run_dir):
        return
    with RunStore(run_dir, readonly=True) as store:  # opening checks the file: damage stops an append too
        if append:
            return
        stored_variants, stored_cases = store.stored_ids()
        stored_labels = {vid: label for vid, label, _dims in store.variants().values()}
    data = read_run_json(run_dir)
    problems = []
    selected = {v.id for v in prep.variants}
    differs = _grid_change(data, identity, selected, stored_variants, stored_labels)
    if differs is not None:
        before = ", ".join(_recorded(data, "grid", "grid")) or "another grid"
        problems.append(f"grid {before} ({len(stored_variants)} variants stored), not {identity.grid} "
                        f"({len(selected & stored_variants)} of its {len(selected)} selected variants stored; "
                        f"{differs})")
    selected = {c.id for c in prep.cases}
    if not (stored_cases <= identity.dataset_cases or selected <= stored_cases):
        before = ", ".join(_recorded(data, "dataset", "dataset")) or "another dataset"
        problems.append(f"dataset {before} ({len(stored_cases)} cases stored), not {identity.dataset} "
                        f"({len(selected & stored_cases)} of its {len(selected)} selected cases stored)")
    if problems:
        raise RunError(f"{run_dir / RUN_JSON}: this run directory holds the results of {'; and '.join(problems)}. "
                       "Give this run its own --run-dir, or add --append (append=True in Python) to combine them "
                       "in one directory on purpose.")


def _names(ids: Iterable[str], labels: Mapping[str, str], most: int = 4) -> str:
    ordered = sorted(labels.get(i, i) for i in ids)
    more = f" and {len(ordered) - most} more" if len(ordered) > most else ""
    return "; ".join(ordered[:most]) + more


def _grid_change(data: Mapping[str, Any], identity: RunIdentity, selected: set[str], stored: set[str],
                 stored_labels: Mapping[str, str]) -> str | None:
    """How this run's grid differs from the run directory's (``check_run_dir``); None when it is the same."""
    recorded = [frozenset(map(str, i["grid"]["ids"])) for i in data.get("invocations") or ()
                if isinstance(i, Mapping) and isinstance(i.get("grid"), Mapping)
                and isinstance(i["grid"].get("ids"), list)]
    grid = identity.grid_variants
    if recorded:
        if grid in recorded:
            return None
        before: frozenset[str] | set[str] = recorded[-1]
    else:  # an older record: what the store holds, and how many variants the grids had
        sizes = {i["grid"].get("variants") for i in data.get("invocations") or ()
                 if isinstance(i, Mapping) and isinstance(i.get("grid"), Mapping)} - {None}
        if selected <= stored or (stored <= grid and (not sizes or len(grid) in sizes)):
            return None
        before = stored
    labels = {**stored_labels, **identity.grid_labels}
    added, lacks = grid - before, before - grid
    parts = []
    if added:
        parts.append(f"its grid adds {len(added)} variant(s): {_names(added, labels)}")
    if lacks:
        parts.append(f"lacks {len(lacks)}: {_names(lacks, labels)}")
    return ", ".join(parts) or "its variants differ"


def _invocation(prep: Prepared, *, append: bool, retry_errors: bool) -> dict[str, Any]:
    """This invocation's record in ``run.json``: what was asked (config, grid, dataset, models) and when."""
    from promptgrid import __version__

    config = prep.config
    grid: dict[str, Any] = {"ref": config.grid, "name": prep.grid_name, "selected": len(prep.variants)}
    dataset: dict[str, Any] = {"ref": config.dataset, "selected": len(prep.cases)}
    if prep.identity is not None:
        grid["variants"] = len(prep.identity.grid_variants)
        grid["ids"] = sorted(prep.identity.grid_variants)
        dataset["cases"] = len(prep.identity.dataset_cases)
    return {"id": f"{time.time():.6f}-{os.getpid()}", "started": _now(), "finished": None,
            "promptgrid_version": __version__, "config": config.to_dict(), "grid": grid, "dataset": dataset,
            "models": [m.name for m in config.models], "repeats": config.repeats, "jobs": prep.jobs,
            "pending": None, "append": append, "retry_errors": retry_errors,
            "plan": {"variants": [v.id for v in prep.variants], "cases": [c.id for c in prep.cases],
                     **({"budget": prep.per_model} if config.goal is not None else {})}}


@dataclass(frozen=True)
class Plan:
    """The jobs an invocation planned: its models x variants x cases x ``repeats`` (from its ``run.json`` record)."""

    models: tuple[str, ...]
    variants: tuple[str, ...]
    cases: tuple[str, ...]
    repeats: int
    budget: int | None = None
    """An adaptive plan's jobs per model (``--budget``, at most the product); None: the product."""

    @property
    def jobs(self) -> int:
        return len(self.models) * self.per_model()

    def per_model(self) -> int:
        product = len(self.variants) * len(self.cases) * self.repeats
        return product if self.budget is None else min(self.budget, product)

    @classmethod
    def of(cls, invocation: Mapping[str, Any]) -> Plan | None:
        """The plan an invocation record names; None for a record without one (written before plans were)."""
        plan = invocation.get("plan")
        models, repeats = invocation.get("models"), invocation.get("repeats")
        if not (isinstance(plan, Mapping) and isinstance(models, list) and isinstance(repeats, int)):
            return None
        variants, cases = plan.get("variants"), plan.get("cases")
        if not (isinstance(variants, list) and isinstance(cases, list)):
            return None
        budget = plan.get("budget")
        return cls(tuple(map(str, models)), tuple(map(str, variants)), tuple(map(str, cases)), repeats,
                   budget if isinstance(budget, int) and not isinstance(budget, bool) else None)


def last_invocation(record: Mapping[str, Any]) -> dict[str, Any]:
    """The latest invocation in a ``run.json`` record (``{}`` when none)."""
    invocations = record.get("invocations") or []
    last = invocations[-1] if invocations else {}
    return last if isinstance(last, dict) else {}


def plan_status(store: RunStore, plan: Plan | None) -> dict[str, tuple[int, int]]:
    """Per model of ``plan``: (its jobs, those without a result) counted now from the store; {} without a plan.

    The one count of pending jobs that ``status``, ``report`` and ``run.json`` share: a job of the plan is
    pending until the store holds a result (done, error or unsupported) for it, whether or not the runner
    reached it (a stopped model's unreached jobs have no row yet) and whoever stored the result (a run, a
    provider batch collected by ``status``, ``import-batch``).
    """
    if plan is None:
        return {}
    found = store.plan_counts(plan.models, plan.variants, plan.cases, plan.repeats)
    per_model = plan.per_model()
    # An adaptive plan's cells are some of the product's: its results there count, up to the budget.
    return {m: (per_model, max(0, per_model - found.get(m, (0, 0))[1])) for m in plan.models}


def model_counts(store: RunStore, plan: Plan | None) -> list[tuple[str, int, int, int, int, int]]:
    """(model, jobs, done, errors, pending, unsupported) per model: the store's job rows plus the jobs of
    ``plan`` the runner has not reached yet (they have no row, and are pending)."""
    rows = store.model_counts()
    if plan is None:
        return rows
    found = store.plan_counts(plan.models, plan.variants, plan.cases, plan.repeats)
    unreached = {m: max(0, plan.per_model() - found.get(m, (0, 0))[0]) for m in plan.models}
    out = [(m, jobs + unreached.get(m, 0), done, errors, pending + unreached.get(m, 0), unsupported)
           for m, jobs, done, errors, pending, unsupported in rows]
    seen = {r[0] for r in rows}
    out += [(m, n, 0, 0, n, 0) for m, n in unreached.items() if m not in seen and n]
    return out


def refresh_pending(run_dir: str | os.PathLike[str], store: RunStore) -> None:
    """Count the latest invocation's pending jobs again and write them in ``run.json`` (after answers were stored
    outside that invocation: ``import-batch``, ``status`` collecting a provider batch). The caller holds the
    run directory's lock. A record without a plan, or of an invocation that has not finished, is left alone."""
    path = Path(run_dir) / RUN_JSON
    data = read_run_json(run_dir)
    last = last_invocation(data)
    plan = Plan.of(last)
    if plan is None or last.get("finished") is None:
        return
    pending = sum(p for _jobs, p in plan_status(store, plan).values())
    if last.get("pending") == pending:
        return
    last["pending"] = pending
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _write_run_json(prep: Prepared, invocation: dict[str, Any]) -> None:
    """Add (or update) this invocation in ``run.json``, keeping every earlier one; written to a temp file, then
    renamed (``safeio.atomic_write`` refuses a run directory's own files by design, so it is not used here).

    A version-1 file (one config, invocations without their own) is upgraded in place: its invocations are
    kept as they are. The top-level ``config``, ``grid_name``, ``variants`` and ``cases`` describe the latest
    invocation, as before.
    """
    from . import store as _store

    path = Path(prep.config.run_dir) / RUN_JSON
    data = read_run_json(prep.config.run_dir)
    invocations = [i for i in data.get("invocations") or () if i.get("id") != invocation["id"]]
    invocations.append(invocation)
    data = {
        "version": RUN_JSON_VERSION,
        "store_schema": _store.SCHEMA_VERSION,
        "config": prep.config.to_dict(),
        "grid_name": prep.grid_name,
        "variants": len(prep.variants),
        "cases": len(prep.cases),
        "invocations": invocations,
    }
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


async def execute(prep: Prepared, *, progress: bool = False, progress_stream: TextIO | None = None,
                  retry_errors: bool = False, scorer: Any = None, clients: Mapping[str, Any] | None = None,
                  started: Callable[[Any], None] | None = None, append: bool = False,
                  batch: BatchMode | None = None, backends: Mapping[str, Any] | None = None) -> Any:
    """Run a prepared config in the run directory; returns the invocation's ``RunSummary``.

    Holds the run directory's lock throughout (a second writer gets a
    ``RunError``). A full disk raises ``StoreFullError`` once the calls in
    flight are done (answers the store could not take are spilled and stored
    by the next run). A directory that holds another grid's or dataset's
    results is refused before any call (``check_run_dir``) unless ``append``.
    The invocation is appended to ``run.json`` when it starts, and completed
    with its summary and the jobs of its plan still pending when it ends.
    ``progress`` draws a progress line on ``progress_stream`` (stderr);
    nothing else is written to the console. ``scorer`` and ``clients``
    replace ``promptgrid.matrix.scoring.score`` and the model clients (tests).
    ``started`` is called with the ``Runner`` once it exists, from the loop
    that runs it (so another thread can stop it). ``batch`` sends the new
    calls through the models' batch APIs (``promptgrid.matrix.running.batch``)
    instead of online; every model must have one (``RunError`` otherwise,
    before anything is sent); ``backends`` replaces them (tests).
    """
    from promptgrid.matrix.clients import Redactor

    config = prep.config
    run_dir = Path(config.run_dir)
    redactor = Redactor()
    made_here = not run_dir.exists()
    try:
        return await _execute_locked(prep, run_dir, redactor, progress=progress, progress_stream=progress_stream,
                                     retry_errors=retry_errors, scorer=scorer, clients=clients, started=started,
                                     append=append, batch=batch, backends=backends)
    except PromptgridError:
        if made_here:
            _remove_if_empty(run_dir)  # bad input (an unknown model, a missing key) leaves no run directory
        raise


def _remove_if_empty(run_dir: Path) -> None:
    """Remove a run directory this invocation made and left holding nothing but its lock file."""
    try:
        if {p.name for p in run_dir.iterdir()} <= {LOCK_FILE}:
            (run_dir / LOCK_FILE).unlink(missing_ok=True)
            run_dir.rmdir()
    except OSError:
        pass


async def _execute_locked(prep: Prepared, run_dir: Path, redactor: Any, *, progress: bool,
                          progress_stream: TextIO | None, retry_errors: bool, scorer: Any,
                          clients: Mapping[str, Any] | None, started: Callable[[Any], None] | None, append: bool,
                          batch: BatchMode | None, backends: Mapping[str, Any] | None) -> Any:
    from .progress import Progress
    from .runner import Runner

    config = prep.config
    with disk_full_errors(run_dir), RunLock(run_dir):
        check_run_dir(prep, append=append)
        # A rerun whose every job has a result sends nothing: it loads no model, imports no provider library and
        # scores no warm-up answer (each client is made only if something asks for it).
        idle = clients is None and _nothing_to_send(prep, run_dir, retry_errors=retry_errors, batch=batch)
        if scorer is None:
            from promptgrid.matrix.scoring import score as scorer

            if not idle:
                from promptgrid.languages import preload_model

                preload_model()  # beside the clients' imports (litellm: seconds); _warm_up waits for it
        the_clients = dict(clients) if clients is not None else _clients(config, redactor, deferred=idle)
        if batch is not None and backends is None:
            backends = batch_backends(config.models, the_clients, retry=config.retry_policy())
        store = RunStore(run_dir, create=True)
        invocation = _invocation(prep, append=append, retry_errors=retry_errors)
        _write_run_json(prep, invocation)
        threshold = gc.get_threshold()
        try:
            if not idle:
                _warm_up(scorer, prep)
            # Everything loaded so far (modules, cases, caches, the language-id model) lives until
            # the end: take it out of the cyclic GC's reach, so the collections that litellm's
            # many short-lived objects trigger do not rescan it on every call.
            gc.collect()
            gc.freeze()
            # And collect the young generation less often: a call leaves thousands of short-lived containers
            # (litellm's request and response objects), and each collection also walks the calls in flight.
            gc.set_threshold(GC_YOUNG, *threshold[1:])
            bar = Progress(prep.jobs, stream=progress_stream or sys.stderr, enabled=progress)
            common = dict(variants=prep.variants, cases=prep.cases, renderer=prep.renderer, clients=the_clients,
                          store=store, scorer=scorer, progress=bar, redactor=redactor, retry_errors=retry_errors)
            transport = None
            if batch is not None and backends is not None:
                from .batch import BatchTransport

                transport = BatchTransport(backends=backends, run_dir=run_dir, wait=batch.wait, poll_s=batch.poll_s)
            runner = Runner(config, transport=transport, **common)
            if started is not None:
                started(runner)
            summary = await runner.run()
            if summary.stopped == "disk_full":  # run.json keeps the invocation as started: it may not fit
                raise disk_full_stop(store, spilled=summary.spilled, lost=summary.lost)
            invocation.update(finished=_now(), pending=sum(p for _jobs, p in plan_status(
                store, Plan.of(invocation)).values()), summary=summary.to_dict())
            _write_run_json(prep, invocation)
        finally:
            gc.set_threshold(*threshold)
            gc.unfreeze()
            store.close()
            if clients is None:  # ours: a Router's callbacks leave litellm's process-wide lists
                for client in the_clients.values():
                    await client.aclose()
    return summary


@dataclass(frozen=True)
class BatchMode:
    """How a ``--batch`` run behaves once its batches are submitted."""

    wait: bool = True
    """Poll until every batch is collected (False: return once submitted; ``status`` or a re-run collects)."""
    poll_s: float = 30.0
    """Seconds between polls."""


def batch_backends(models: Iterable[ModelSpec], clients: Mapping[str, Any], *,
                   retry: RetryPolicy | None = None) -> dict[str, Any]:
    """The batch backend of every model; ``RunError`` naming the models that have none."""
    from promptgrid.matrix.clients import make_batch_backend
    from promptgrid.matrix.clients._litellm import LiteLLMClient

    out: dict[str, Any] = {}
    missing = []
    for spec in models:
        client = clients[spec.name]
        backend = make_batch_backend(client, spec.batch, retry=retry) if isinstance(client, LiteLLMClient) else None
        if backend is None:
            missing.append(spec.name)
        else:
            out[spec.name] = backend
    if missing:
        raise RunError(f"--batch: no batch API for {', '.join(missing)}. Batches go through OpenAI-compatible "
                       "files + batches endpoints (openai/, azure/, hosted_vllm/ models, e.g. vLLM with --api-base) "
                       "and Bedrock batch inference (bedrock/ models). Run these models online (without --batch), or "
                       "write their requests with promptgrid export-batch and run them on your own engine.")
    return out


def _warm_up(scorer: Any, prep: Prepared) -> None:
    """Score one dummy answer first, so one-time loads (language-id model) happen before calls start."""
    try:
        scorer("I cannot help with that.", prep.variants[0], prep.cases[0])
    except Exception:  # noqa: BLE001 - a broken scorer is reported per response later
        pass


# --------------------------------------------------------------------------- re-scoring


def rescore(run_dir: str | os.PathLike[str], *, scorer: Any = None, only_unscored: bool = False) -> dict[str, int]:
    """Score every stored response again (no model call), under the run's lock.

    Returns counts: ``scored``, ``changed`` (validity flipped), ``errors``
    (failed calls: no response to score), ``failed`` (the scorer raised).
    """
    from .runner import verdict_row

    if scorer is None:
        from promptgrid.matrix.scoring import score as scorer
    path = Path(run_dir)
    if not (path / STORE_FILE).is_file():
        raise RunError(f"{path} is not a run directory (no {STORE_FILE}).")
    stats = {"scored": 0, "changed": 0, "errors": 0, "failed": 0}
    with RunLock(path), RunStore(path) as store:
        variants, cases = stored_records(store)
        old = store.validity()
        batch: list[Any] = []
        for row, response, status in store.iter_scorable(only_unscored=only_unscored):
            if status == UNSUPPORTED:  # never sent: no verdict, out of the rates
                continue
            if status != "done":
                batch.append((row, None, False, None))
                stats["errors"] += 1
            else:
                try:
                    vr = verdict_row(row, scorer(response or "", variants[row[1]], cases[row[2]]))
                except Exception:  # noqa: BLE001 - keep going; count it
                    stats["failed"] += 1
                    continue
                stats["scored"] += 1
                if old.get(row) is not None and bool(old[row]) != vr[2]:
                    stats["changed"] += 1
                batch.append(vr)
            if len(batch) >= 1000:
                store.set_verdicts(batch)
                batch = []
        store.set_verdicts(batch)
    return stats


def run_sync(coro: Any, thread_name: str) -> Any:
    """Run ``coro`` to its end from synchronous code, also where an event loop is already running (Jupyter: in a
    new loop on a worker thread named ``thread_name``, waited for)."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix=thread_name) as pool:
        return pool.submit(asyncio.run, coro).result()


# --------------------------------------------------------------------------- promptgrid status


@dataclass(frozen=True)
class RunStatus:
    """Where a run directory stands (``promptgrid status``): jobs per model, batches, and what polling collected."""

    path: Path
    models: list[tuple[Any, ...]]
    """A row per model, its values named by ``columns``: (model, jobs, done, errors, pending, unsupported) for a
    single-turn run."""
    batches: list[Any]
    """``store.BatchRecord``s, oldest first."""
    collected: Any = None
    """What this call collected (a ``batch.CollectCounts``; None: not polled)."""
    note: str | None = None
    """Why the batches were not polled, when they were not."""
    problems: list[str] = field(default_factory=list)
    """One line per batch that could not be polled (its batch API down, refusing, or answering garbage),
    redacted; such a batch stays as recorded and the next ``status`` polls it again."""
    kind: str = "single"
    """The kind of run (``Run.kind.name``): ``single`` or ``conversation``."""
    columns: tuple[str, ...] = ("model", "jobs", "done", "errors", "pending", "unsupported")
    """The names of the values of a ``models`` row (the JSON keys; the table's headings unless ``headers``)."""
    headers: tuple[str, ...] | None = None
    """The table's headings when they say more than ``columns``."""
    heading: str | None = None
    """The first line of the text (default: the run directory)."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Further figures of the kind (a conversation run's ``steps_stored``), in the JSON form."""
    live_hint: str = "run `promptgrid status {path}` again later (or with --wait)"
    """What to do about live batches (``{path}``: the run directory)."""

    @property
    def live(self) -> list[Any]:
        return [b for b in self.batches if b.live and b.kind != "export"]

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``promptgrid status --json``)."""
        return {
            "run_dir": str(self.path), "kind": self.kind, "note": self.note, **self.extra,
            "models": [dict(zip(self.columns, m, strict=True)) for m in self.models],
            "batches": [{"id": b.id, "model": b.model, "kind": b.kind, "state": b.state,
                         "provider_id": b.provider_id, "requests": b.requests, "created_at": b.created_at,
                         "updated_at": b.updated_at, "detail": json.loads(b.detail) if b.detail else None}
                        for b in self.batches],
            "collected": None if self.collected is None else self.collected.__dict__,
            "problems": self.problems}


async def run_status(run_dir: str | os.PathLike[str], *, poll: bool = True, wait: bool = False, poll_s: float = 30.0,
                     backends: Mapping[str, Any] | None = None, scorer: Any = None) -> RunStatus:
    """Read a run directory's state; with ``poll``, advance and collect its live batches first.

    Polling writes the store, so it takes the run directory's lock; when a run
    holds it (that run polls its own batches), the state is read without
    polling and ``note`` says why. The models' clients are rebuilt from the
    latest invocation in ``run.json`` (their credentials must be in the
    environment, as for the run), only for models with live batches.
    ``backends`` and ``scorer`` replace them (tests).

    A batch whose batch API call fails (down, refusing, answering garbage)
    does not stop the others: it is left as recorded and named, in one
    redacted line, in ``RunStatus.problems``.
    """
    from promptgrid.redact import Redactor

    from .batch import poll_batches

    path = Path(run_dir)
    collected = None
    note = None
    problems: list[str] = []
    redactor = Redactor()

    def problem(batch: Any, exc: CallError) -> None:
        problems.append(one_line(redactor(f"batch {batch.id} ({batch.model}, {batch.state}): batch API "
                                          f"{exc.kind.value} error: {exc.message}")))
    with RunStore(path, readonly=True) as store:
        live_models = sorted({b.model for b in store.batches() if b.live and b.kind != "export"})
    if poll and live_models:
        lock = RunLock(path)
        try:
            lock.acquire()
        except RunError as exc:
            note = f"not polled: {exc}"
        else:
            try:
                if backends is None:
                    backends = _backends_of_run(path, live_models, redactor)
                if scorer is None:
                    from promptgrid.matrix.scoring import score as scorer
                with RunStore(path) as store:
                    variants, cases = stored_records(store)
                    collected = await poll_batches(store, backends, path, scorer=scorer, variants=variants,
                                                   cases=cases, redactor=redactor, wait=wait, poll_s=poll_s,
                                                   models=live_models, on_error=problem)
                    if collected is not None and collected.written:
                        refresh_pending(path, store)
            finally:
                lock.release()
    try:
        plan = Plan.of(last_invocation(read_run_json(path)))
    except RunError:  # an unreadable run.json: the store's rows alone (its plan is not known)
        plan = None
    with RunStore(path, readonly=True) as store:
        return RunStatus(path, model_counts(store, plan), store.batches(), collected, note, problems)



def _backends_of_run(path: Path, models: Sequence[str], redactor: Any) -> dict[str, Any]:
    """The batch backends of ``models`` as the latest invocation in ``run.json`` configured them."""
    data = read_run_json(path)
    invocations = data.get("invocations") or []
    config = (invocations[-1].get("config") if invocations else None) or data.get("config") or {}
    fields = set(ModelSpec.__dataclass_fields__)
    specs = [ModelSpec(**{k: v for k, v in m.items() if k in fields})
             for m in config.get("models") or [] if isinstance(m, dict) and m.get("name") in models]
    unknown = set(models) - {s.name for s in specs}
    if unknown:
        raise RunError(f"{path / 'run.json'} does not name model(s) {', '.join(sorted(unknown))} whose batches are "
                       "live: run the same `promptgrid run ... --batch` command to collect them.")
    fields_of_run = {k: config[k] for k in ("max_retries", "backoff_base_s", "backoff_max_s", "retry_after_cap")
                     if isinstance(config.get(k), (int, float)) and not isinstance(config.get(k), bool)}
    return batch_backends(specs, _clients(None, redactor, specs), retry=retry_policy(**fields_of_run))
