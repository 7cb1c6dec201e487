"""What a run is: grid, dataset, models with their generation parameters and limits.

A run config YAML (``promptgrid run CONFIG.yaml``)::

    grid: bfcl_v4                  # built-in name or path (relative to this file)
    dataset: mini                  # any dataset spec (mini, bfcl:simple_python, jsonl:PATH)
    bfcl_data: null                # optional
    run_dir: runs/my_run           # optional, relative to this file (default ./runs/<grid>__<dataset>)
    repeats: 1                     # optional; K > 1 samples (see below)
    limit: 10                      # optional: first N cases
    cases: [simple_0]              # optional
    variants: [ret_fmt=json&...]   # optional
    translation_store: path        # optional
    max_cost: 5.0                  # optional, USD for the whole run directory
    max_retries: 5                 # optional
    retry_after_cap: 120           # optional: longest Retry-After (s) obeyed before a retry
    max_jobs: 5000000              # optional: most jobs the plan may have (counted before it is built)
    max_steps: 20                  # optional, conversation datasets: answers with calls per turn (force-quit past it)
    dedupe_requests: false         # optional, conversation datasets: identical requests share an answer (temperature 0)
    strict_arguments: false        # optional, conversation datasets: refuse calls whose arguments fail the docs
    goal: best-worst               # optional: an adaptive study (best-worst, distribution, uniform) ...
    budget: 500                    # ... of at most this many jobs per model (needed with goal)
    rounds: 10                     # optional, with goal: rounds the budget is planned in
    defaults:                      # optional, applied to every model (a model's own keys win)
      concurrency: 8
      params: {max_tokens: 512}
    models:
      - openai/gpt-4o-mini         # a plain model string, or a mapping:
      - name: openai/my-model
        api_base: http://localhost:8000/v1   # or a list of replicas: [http://h1:8000/v1, http://h2:8000/v1]
        api_key_env: MY_SERVER_KEY # the NAME of the variable holding the key, never the key
        params: {temperature: 0, max_tokens: 512, seed: 1, top_p: 1}
        concurrency: 8             # calls in flight; per endpoint when api_base lists several
        rpm: 500                   # requests per minute
        tpm: 200000                # tokens per minute
        timeout: 60                # seconds per call
        constraints: vllm          # constrained decoding: openai | vllm | llama.cpp | none (litellm models)
        batch: {max_requests: 50000}  # --batch options; Bedrock also role_arn, s3_uri (see ModelSpec.batch)

Errors name the file, line and key, as the grid loader does. The top-level keys
besides grid, dataset and defaults are run options (``RunOptions``: each also a
flag of ``promptgrid run`` and a keyword of ``promptgrid.run``); a flag or
keyword wins over the file.

Several endpoints: ``api_base`` may list the URLs of several servers of the
same model (vLLM replicas). Calls are spread over them by litellm's Router
(least-busy), and a call that finds one down (refused connection, 5xx) is
retried at once on another (``LiteLLMClient``); ``concurrency`` is
then the limit *per endpoint*, so the model has ``concurrency x endpoints``
calls in flight (``ModelSpec.in_flight``); ``rpm`` and ``tpm`` stay limits of
the whole model. Which endpoint answered is stored per call (``endpoint``).

Generation parameters are explicit and recorded per run and per call:
``temperature`` defaults to 0 (greedy, reproducible), ``max_tokens`` to 512.
With ``repeats`` K > 1 and no temperature given, temperature defaults to 0.7:
repeats exist to measure variance (pass^k); at temperature 0 most providers
return the same text K times and the extra calls buy nothing. Give
``temperature: 0`` explicitly to measure provider nondeterminism instead.
With a ``seed``, repeat r is sent with seed + r.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, get_args
from urllib.parse import urlsplit

from typing_extensions import TypedDict

from promptgrid.errors import RunError, closest
from promptgrid.matrix.clients import CONSTRAINTS
from promptgrid.matrix.clients._redact import redact_url
from promptgrid.providers import DEFAULT_RETRY_AFTER_CAP_S, RetryPolicy
from promptgrid.variants import YamlNode as _Node
from promptgrid.variants import compose_yaml
from promptgrid.variants._yaml import MAX_GRID_BYTES, read_yaml_text
from promptgrid.variants._yaml import plain as _plain

from .options import Option, declared
from .plan import MAX_JOBS

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_SAMPLING_TEMPERATURE",
    "GOALS",
    "ModelSpec",
    "PlanOptions",
    "RunConfig",
    "RunError",
    "RunOptions",
    "load_run_config",
    "dataset_key",
    "default_run_dir",
]

DEFAULT_MAX_TOKENS = 512
DEFAULT_SAMPLING_TEMPERATURE = 0.7
DEFAULT_CONCURRENCY = 8
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_RETRIES = 5

# Generation parameters a model may take (anything else litellm accepts may be added under
# params: too; these are the ones checked for type and bounds by number_problem).
PARAM_BOUNDS: dict[str, dict[str, Any]] = {
    "temperature": {"minimum": 0},
    "max_tokens": {"integer": True, "minimum": 1},
    "seed": {"integer": True, "minimum": -2**63},
    "top_p": {"minimum": 0},
}
_MODEL_KEYS = ("name", "api_base", "api_key_env", "params", "concurrency", "rpm", "tpm", "timeout", "constraints",
               "batch")
#: Keys of a model's ``batch:`` options: the limits every batch API has, and Bedrock's S3 and role settings.
BATCH_OPTIONS = ("max_requests", "max_bytes", "min_requests", "role_arn", "s3_uri", "output_s3_uri", "region",
                 "timeout_hours")
_SECRET_KEYS = ("api_key", "key", "token", "secret", "password", "aws_secret_access_key")



@dataclass(frozen=True)
class ModelSpec:
    """One model of a run, with how to reach it and how hard to push it.

    Only ``name`` and ``params`` change a model's answers, so only they enter
    a job's key; ``api_base``, ``api_key_env`` and the limits do not.
    ``constraints`` says how the constrained call mode is sent (the grammar or
    schema itself is in the prompt's request, which the key covers); vllm and
    llama.cpp send the same grammar, so it is left out of the key too.
    """

    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    """Generation parameters sent with every call (temperature, max_tokens, seed, top_p, ...)."""
    api_base: str | None = None
    """The server to send to (vLLM, llama.cpp server, Ollama, a proxy); the first of ``api_bases``."""
    api_key_env: str | None = None
    concurrency: int = DEFAULT_CONCURRENCY
    """Calls in flight at once; per endpoint when ``api_bases`` has several (see ``in_flight``)."""
    rpm: float | None = None
    tpm: float | None = None
    timeout: float = DEFAULT_TIMEOUT_S
    constraints: str | None = None
    """How ``call_mode: constrained`` is sent to a litellm model (``CONSTRAINTS``): ``openai`` (JSON-schema
    ``response_format``, json return format only), ``vllm`` / ``llama.cpp`` (the GBNF grammar, for a server
    given with ``api_base``), ``none``. ``None``: ``openai`` where litellm says the model takes a JSON schema,
    else unsupported. Local models always use the grammar; fake models answer every mode."""

    batch: Mapping[str, Any] = field(default_factory=dict)
    """Options of the model's batch API (``--batch``; ``BATCH_OPTIONS``): ``max_requests`` and ``max_bytes`` per
    batch (default: the provider's limits), and for Bedrock ``role_arn``, ``s3_uri`` (required),
    ``output_s3_uri``, ``region``, ``timeout_hours``, ``min_requests``. Not in the job key."""

    api_bases: tuple[str, ...] = ()
    """Every endpoint serving this model (vLLM replicas), in config order: ``(api_base,)`` for one, empty for
    none. Give either field; the other is filled in. Several are sent through litellm's Router (least-busy,
    failover); not in the job key (any replica gives the same answers)."""

    def __post_init__(self) -> None:
        bases = tuple(self.api_bases) if self.api_bases else ((self.api_base,) if self.api_base else ())
        if self.api_base is not None and bases and self.api_base != bases[0]:
            raise RunError(f"model {self.name}: api_base {redact_url(self.api_base)!r} is not the first of "
                           "api_bases; give one of the two fields.")
        problem = api_bases_problem(bases)
        if problem is not None:
            raise RunError(f"model {self.name}: api_base: {problem}.")
        object.__setattr__(self, "api_bases", bases)
        object.__setattr__(self, "api_base", bases[0] if bases else None)
        if self.constraints is not None and self.constraints not in CONSTRAINTS:
            raise RunError(f"model {self.name}: constraints {self.constraints!r} is not one of "
                           f"{', '.join(CONSTRAINTS)}.{closest(str(self.constraints), CONSTRAINTS)}")
        if self.constraints is not None and self.name.startswith(("local/", "fake/", "replay/")):
            raise RunError(f"model {self.name}: constraints applies to litellm models only (local models always "
                           "constrain with a grammar, fake models answer every call mode); remove it.")

    @property
    def in_flight(self) -> int:
        """The most calls of this model in flight at once: ``concurrency`` per endpoint."""
        return max(1, self.concurrency) * max(1, len(self.api_bases))

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "params": dict(self.params), "batch": dict(self.batch),
                "api_bases": list(self.api_bases)}


@dataclass(frozen=True)
class RunConfig:
    """A whole run. Written to ``run.json`` (no secrets: keys are only named by ``api_key_env``, and
    ``to_dict`` strips credentials from ``api_base``)."""

    grid: str
    dataset: str
    models: tuple[ModelSpec, ...]
    run_dir: Path
    bfcl_data: str | None = None
    repeats: int = 1
    limit: int | None = None
    cases: tuple[str, ...] = ()
    variants: tuple[str, ...] = ()
    translation_store: str | None = None
    max_cost: float | None = None
    max_retries: int = DEFAULT_MAX_RETRIES
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0
    retry_after_cap: float = DEFAULT_RETRY_AFTER_CAP_S
    """Seconds: a longer Retry-After is cut to this (a server asking for a day cannot freeze the run)."""
    max_jobs: int = MAX_JOBS
    """Most jobs (models x variants x cases x repeats) the run may plan; counted before any is built."""
    max_steps: int = 20
    """Conversation datasets: answers with calls per user turn before a force-quit (``RunOptions.max_steps``)."""
    dedupe_requests: bool = False
    """Conversation datasets: byte-identical requests of different episodes share one answer
    (``RunOptions.dedupe_requests``)."""
    strict_arguments: bool = False
    """Conversation datasets: the strict argument rule (``RunOptions.strict_arguments``); False, bfcl-eval's."""
    goal: str | None = None
    """What the run plans (``promptgrid.matrix.running.planning.GOALS``): None, every job of the product; an adaptive
    goal (``best-worst``, ``distribution``, ``uniform``) plans ``budget`` jobs per model in ``rounds`` rounds."""
    budget: int | None = None
    """Adaptive runs: the most jobs planned per model (at most the product variants x cases x repeats)."""
    rounds: int | None = None
    """Adaptive runs: how many rounds the budget is planned in (each round decided from the results of the ones
    before it; with ``--batch`` each round is one batch per model). None: ``planning.DEFAULT_ROUNDS``."""
    plan_seed: int = 0
    """Adaptive runs: the seed of the planner's random choices (``--seed``, else 0): same seed, same decisions."""

    def retry_policy(self) -> RetryPolicy:
        """The one retry policy of this run: the runner's calls and the models' batch APIs (``retry_policy``)."""
        return retry_policy(self.max_retries, self.backoff_base_s, self.backoff_max_s, self.retry_after_cap)

    def to_dict(self) -> dict[str, Any]:
        """The record for ``run.json``: every field, ``api_base`` without its credentials."""
        d = dataclasses.asdict(self)
        d["models"] = [{**m.to_dict(), "api_base": redact_url(m.api_base),
                        "api_bases": [redact_url(u) for u in m.api_bases]} for m in self.models]
        d["run_dir"] = str(self.run_dir)
        d["cases"] = list(self.cases)
        d["variants"] = list(self.variants)
        return d


def retry_policy(max_retries: int = DEFAULT_MAX_RETRIES, backoff_base_s: float = 1.0, backoff_max_s: float = 60.0,
                 retry_after_cap: float = DEFAULT_RETRY_AFTER_CAP_S) -> RetryPolicy:
    """A run's retry policy from its fields (``RunConfig.retry_policy``; also for a config read from run.json)."""
    return RetryPolicy(max_attempts=max(1, int(max_retries) + 1), base=float(backoff_base_s), cap=float(backoff_max_s),
                       retry_after_cap=float(retry_after_cap))


# --------------------------------------------------------------------------- the run's options

Goal = Literal["best-worst", "distribution", "uniform"]
GOALS: tuple[str, ...] = get_args(Goal)
"""The adaptive goals (``--goal``; ``planning.make_planner`` plans each)."""

_AT_LEAST_1: Mapping[str, Any] = {"integer": True, "minimum": 1}
_POSITIVE: Mapping[str, Any] = {"minimum": 0, "strict": True}

# How --limit picks cases (Dataset.select): on a multilingual dataset, distinct questions, not one question
# in N languages.
_LIMIT_HELP = ("N cases (or conversations): the first N of a one-language dataset; on a multilingual one (mini, "
               "mini:de,ja, mini-mt) N distinct questions (mini-mt: conversation templates), the language taking "
               "turns (the 1st question in the 1st language, the 2nd in the 2nd, ...); beyond the number of "
               "questions, further languages of each")


class PlanOptions(TypedDict, total=False):
    """The options that say what a run plans and what each request is: ``promptgrid run``'s and
    ``promptgrid export-batch``'s (``promptgrid.run``'s and ``promptgrid.export_batch``'s keywords).

    Each is declared here once, with its flag, bounds and docstring (``options.Option``); the flags, the
    keywords' signatures and docstrings, the run config's keys and the checks are made from it. An option
    left out (or None) keeps the run config's value, else the default.
    """

    bfcl_data: Annotated[str | os.PathLike[str] | None, Option(
        "--bfcl-data", "PATH", path=True, file=True,
        help="bfcl-eval wheel, folder or gorilla checkout (default: installed bfcl-eval, or $PROMPTGRID_BFCL_DATA)")]
    """Where bfcl-eval's data is, for ``bfcl:`` datasets: a wheel, a folder or a gorilla checkout (default: the
    installed bfcl-eval, or ``$PROMPTGRID_BFCL_DATA``)."""
    limit: Annotated[int | None, Option("--limit", "N", help=_LIMIT_HELP, bounds=_AT_LEAST_1, file=True)]
    """The first N cases (or conversations); on a multilingual dataset (``mini``, ``mini-mt``) N distinct
    questions (conversation templates), the language taking turns."""
    cases: Annotated[Iterable[str] | None, Option("--case", "ID", many=True, file=True)]
    """Only these case ids."""
    variants: Annotated[Iterable[str] | None, Option("--variant", "ID", many=True, file=True)]
    """Only these variants (their ids, as ``promptgrid grid show`` prints them)."""
    repeats: Annotated[int | None, Option("--repeats", "K", bounds=_AT_LEAST_1, file=True)]
    """Samples of each job: K > 1 measures variance (pass^k); the temperature then defaults to 0.7."""
    translation_store: Annotated[str | os.PathLike[str] | None, Option(
        "--store", "PATH", help="translation store to read", path=True, file=True)]
    """A translation store to read translated prompts from (default: the shipped catalogs only)."""
    max_jobs: Annotated[int | None, Option(
        "--max-jobs", "N", bounds=_AT_LEAST_1, file=True,
        help="most jobs (models x variants x cases x repeats; for a conversation dataset the episodes, models x "
             "variants x conversations x repeats) the run may plan, counted before any is built (default 5,000,000)",
        help_for={"export-batch": "most jobs the export may plan, as promptgrid run --max-jobs (default 5,000,000)"})]
    """The most jobs (models x variants x cases x repeats) the run may plan, counted before any is built
    (default 5,000,000; ``RunError`` naming the numbers past it). For a conversation dataset: the most episodes
    (models x variants x conversations x repeats)."""
    max_steps: Annotated[int | None, Option(
        "--max-steps", "N", bounds=_AT_LEAST_1, file=True,
        help="conversation datasets: most answers with calls per user turn; past it the turn and the conversation "
             "are force-quit (default 20, as bfcl-eval)")]
    """Conversation datasets: the most answers with calls per user turn before the turn, and the conversation, are
    force-quit (default 20: bfcl-eval's ``MAXIMUM_STEP_LIMIT``). Single-turn datasets ignore it."""
    goal: Annotated[Goal | None, Option(
        "--goal", choices=GOALS, file=True,
        help="plan an adaptive study of --budget jobs per model instead of every job: best-worst (Thompson "
             "sampling for the best and the worst variant), distribution (balanced sampling and a logistic model: "
             "every variant's accuracy and the quantiles), uniform (jobs drawn at random, the baseline); --seed "
             "seeds the planner")]
    """Plan an adaptive study of ``budget`` jobs per model instead of every job: ``best-worst`` (Thompson
    sampling for the best and the worst variant), ``distribution`` (balanced sampling and a logistic model: every
    variant's accuracy and the quantiles), ``uniform`` (jobs drawn at random: the baseline). Needs ``budget``;
    ``params["seed"]`` seeds the planner (``RunConfig.plan_seed``; 0 without one)."""
    budget: Annotated[int | None, Option(
        "--budget", "N", bounds=_AT_LEAST_1, file=True, help="with --goal: the most jobs planned per model")]
    """With ``goal``: the most jobs planned per model."""
    rounds: Annotated[int | None, Option(
        "--rounds", "N", bounds=_AT_LEAST_1, file=True,
        help="with --goal: how many rounds the budget is planned in, each decided from the results of the ones "
             "before it (with --batch, one batch per model each)")]
    """With ``goal``: how many rounds the budget is planned in, each decided from the results of the ones before
    it (with ``batch``, one batch per model each; default ``planning.DEFAULT_ROUNDS``)."""
    api_base: Annotated[str | Sequence[str] | None, Option(
        "--api-base", "URL", many=True, model=True,
        help="the server to send to (vLLM, llama.cpp, a proxy); repeat it for replicas of one model: calls are "
             "spread over them (least-busy, failover), --concurrency per server",
        help_for={"export-batch": "the model's server as the run gives it (only decides what the model is sent)",
                  "translate": "with --backend llm:MODEL: the server to send to (vLLM, llama.cpp, a proxy); "
                               "repeat it for replicas of one model",
                  "check-translations": "with --back-translate llm:MODEL: the server to send to"})]
    """The server every model is sent to (vLLM, llama.cpp, a proxy); a list: replicas of one model, the calls
    spread over them (least-busy, failover), ``concurrency`` per server (``ModelSpec.api_bases``)."""
    constraints: Annotated[str | None, Option(
        "--constraints", choices=CONSTRAINTS, model=True,
        help="how call_mode constrained is sent to the litellm models: vllm or llama.cpp (the GBNF grammar, for a "
             "server given with --api-base), openai (JSON-schema response_format, json return format only), none; "
             "default: openai where litellm says the model takes a schema, else the jobs are stored unsupported",
        help_for={"export-batch": "how call_mode constrained is written: vllm (the grammar where vLLM reads it), "
                                  "llama.cpp, openai (JSON-schema response_format), none; default: the run's"})]
    """How ``call_mode: constrained`` is sent to the litellm models (``openai``, ``vllm``, ``llama.cpp``,
    ``none``; see ``ModelSpec.constraints``); local and fake models take none."""
    params: Annotated[Mapping[str, Any] | None, Option(model=True, keys={
        "temperature": Option("--temperature", bounds=PARAM_BOUNDS["temperature"]),
        "max_tokens": Option("--max-tokens", bounds=PARAM_BOUNDS["max_tokens"]),
        "seed": Option("--seed", bounds=PARAM_BOUNDS["seed"],
                       help="sent with every call (repeat r with seed + r); also seeds the --goal planner")})]
    """Generation parameters for every model, over each model's own (temperature, max_tokens, seed, top_p,
    ...); ``seed`` also seeds an adaptive run's planner."""


class RunOptions(PlanOptions, total=False):
    """Every option of a run: ``PlanOptions`` and how a run sends its calls (``promptgrid run``'s flags,
    ``promptgrid.run``'s and ``arun``'s keywords, ``session.build_config``'s)."""

    models: Annotated[Iterable[str | ModelSpec] | None, Option(
        "--model", "M", many=True, file=True,
        help="litellm model string (openai/gpt-4o-mini, bedrock/..., openai/x with --api-base), local/smollm2-135m "
             "or local/PATH.gguf, or a fake model (offline, free; append @SECONDS for a latency): fake/auto calls "
             "the first offered function, no arguments, in the format the prompt asks for (format right, calls "
             "wrong; a tool call in native mode); fake/prose answers in prose, never a call; fake/ground-truth "
             "answers the ground truth; fake/noisy (fake/noisy:SEED) answers it right with a probability per call "
             "mode and return format and otherwise makes the format errors models make; fake/hostile attacks the "
             "environment; replay/PATH answers "
             "each job with the response stored in PATH (a promptgrid export --jsonl file or score-file lines) for "
             "its variant_id and case_id, offline and free")]
    """The models: litellm model strings (``openai/gpt-4o-mini``), ``local/smollm2-135m``, ``fake/auto``,
    ``replay/PATH`` (the answers an export or score-file lines hold for each variant and case), or
    ``ModelSpec``s; instead of the run config's."""
    run_dir: Annotated[str | os.PathLike[str] | None, Option(
        "--run-dir", "DIR", help="default: ./runs/<name>", path=True, file=True)]
    """The run directory (default ``./runs/<grid>__<dataset>``); a second run into it sends only the jobs not
    yet answered."""
    concurrency: Annotated[int | None, Option("--concurrency", "C", bounds=_AT_LEAST_1, model=True)]
    """Calls in flight per model (per endpoint when ``api_base`` lists several)."""
    rpm: Annotated[float | None, Option("--rpm", bounds=_POSITIVE, model=True, help="requests per minute per model")]
    """Requests per minute per model."""
    tpm: Annotated[float | None, Option("--tpm", bounds=_POSITIVE, model=True, help="tokens per minute per model")]
    """Tokens per minute per model."""
    timeout: Annotated[float | None, Option("--timeout", "SECONDS", bounds=_POSITIVE, model=True)]
    """Seconds per call."""
    max_retries: Annotated[int | None, Option("--max-retries", bounds={"integer": True, "minimum": 0}, file=True)]
    """Retries of a failed call (rate limit, server error, timeout)."""
    retry_after_cap: Annotated[float | None, Option(
        "--retry-after-cap", "SECONDS", bounds={"minimum": 0}, file=True,
        help="longest Retry-After a rate-limited call waits before its retry (default 120); a model whose server "
             "still asks for longer after one such wait is stopped, so the run ends")]
    """Seconds: the longest Retry-After a rate-limited call waits before its retry (default 120), however long
    the server asks for; a model whose server still asks for longer after one such wait is stopped."""
    dedupe_requests: Annotated[bool | None, Option(
        "--dedupe-requests", switch=True, file=True,
        help="conversation datasets: send byte-identical requests of different episodes once and share the answer "
             "(only sound at temperature 0); by default every episode is an independent sample")]
    """Conversation datasets: byte-identical requests of different episodes (two conversations that open alike,
    two variants that render alike) are sent once and share the answer. Only sound at temperature 0; by default
    every episode is an independent sample (a stored answer is reused only by the step it was got for)."""
    strict_arguments: Annotated[bool | None, Option(
        "--strict-arguments", switch=True, file=True,
        help="conversation datasets: refuse calls whose arguments do not validate against the function docs (a "
             "number sent as a string, an unknown parameter); by default the method decides, as in bfcl-eval")]
    """Conversation datasets: the strict argument rule: a call whose arguments do not validate against its function
    doc is refused (``bad_arguments``) and never runs. By default (bfcl-eval's rule) the arguments reach the method,
    which decides (it may convert a number sent as a string; an unknown keyword is its ``TypeError``)."""
    max_cost: Annotated[float | None, Option("--max-cost", "USD", bounds=_POSITIVE, file=True)]
    """USD for the whole run directory: no new call is sent once the spend, with the calls in flight, would
    reach it (litellm's prices)."""


def _top_keys(options: type) -> tuple[str, ...]:
    """The top-level keys of a run config: the grid, the dataset, the options declared ``file=True``, the models'
    defaults."""
    return ("grid", "dataset", *(k for k, o in declared(options).items() if o.file), "defaults")


_TOP_KEYS = _top_keys(RunOptions)


def dataset_key(dataset: str) -> str:
    """The dataset spec as the default run directory names it: a ``jsonl:PATH`` spec with its path normalised,
    relative to the working directory when the file is under it, else absolute (``jsonl:./kitchen.jsonl``,
    ``jsonl:kitchen.jsonl`` and ``jsonl:$PWD/kitchen.jsonl`` are one dataset); any other spec as it is.

    The path, not the file's content, names the dataset: a file that grows (more cases) keeps its directory and
    resumes in it (``check_run_dir`` then compares the case ids)."""
    if dataset.startswith("jsonl:") and dataset[len("jsonl:"):].strip():
        full = os.path.abspath(dataset[len("jsonl:"):].strip())  # the path as load_dataset reads it, normalised
        cwd = os.getcwd()
        try:
            inside = os.path.commonpath([full, cwd]) == cwd
        except ValueError:  # another drive (Windows)
            inside = False
        return "jsonl:" + (os.path.relpath(full, cwd) if inside else full)
    return dataset


def default_run_dir(grid: str, dataset: str) -> Path:
    """``./runs/<grid>__<dataset>``, both made filesystem-safe, the dataset as ``dataset_key`` spells it.

    A directory named from the spec as given (before ``jsonl:`` paths were normalised: ``jsonl:./k.jsonl`` made
    ``jsonl_._k.jsonl``) is still used when it exists and the normalised one does not."""
    def safe(s: str) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(s).stem if s.endswith((".yaml", ".yml")) else s).strip("_")

    path = Path("runs") / f"{safe(grid)}__{safe(dataset_key(dataset))}"
    legacy = Path("runs") / f"{safe(grid)}__{safe(dataset)}"
    if legacy != path and legacy.is_dir() and not path.exists():
        return legacy
    return path


def model_params(params: Mapping[str, Any] | None, repeats: int) -> dict[str, Any]:
    """Fill the defaults: temperature 0 (0.7 when sampling repeats), max_tokens 512."""
    out = dict(params or {})
    if out.get("temperature") is None:
        out["temperature"] = DEFAULT_SAMPLING_TEMPERATURE if repeats > 1 else 0.0
    if out.get("max_tokens") is None:
        out["max_tokens"] = DEFAULT_MAX_TOKENS
    return {k: v for k, v in out.items() if v is not None}


def api_base_problem(url: Any) -> str | None:
    """What is wrong with ``url`` as an endpoint (an http(s) URL with a host), or ``None``. Credentials in it
    are never quoted."""
    if not isinstance(url, str):
        return f"expected a URL string, got {type(url).__name__}"
    try:
        parts = urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        if ok:
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        ok = False
    if not ok:
        return f"{redact_url(url)!r} is not an http(s) URL (e.g. http://127.0.0.1:8000/v1)"
    if parts.username is not None or parts.password is not None:
        # httpx refuses a URL with user info next to the Authorization header the SDK always sends.
        return (f"{redact_url(url)!r} has a user name or password in it (user:password@host), which cannot be "
                "sent beside the API key's Authorization header; put the key in an environment variable "
                "named by api_key_env (or OPENAI_API_KEY) and leave it out of the URL")
    return None


def api_bases_problem(urls: Sequence[Any]) -> str | None:
    """What is wrong with a model's endpoints (each an http(s) URL, none twice), or ``None``."""
    seen: set[str] = set()
    for url in urls:
        problem = api_base_problem(url)
        if problem is not None:
            return problem
        if url.rstrip("/") in seen:
            return f"{redact_url(url)!r} is listed twice"
        seen.add(url.rstrip("/"))
    return None


def number_problem(value: Any, *, integer: bool = False, minimum: float = 0.0, strict: bool = False) -> str | None:
    """What is wrong with ``value`` as a finite number ``>= minimum`` (``> minimum`` if ``strict``), or ``None``.

    Shared by run-config files and options (flags, ``pg.run`` keywords) so both refuse nan, inf and negatives.
    """
    if isinstance(value, bool) or not isinstance(value, (int,) if integer else (int, float)):
        return f"must be {'an integer' if integer else 'a number'}, got {type(value).__name__} {value!r}"
    if not math.isfinite(value):
        return f"must be a finite number, got {value}"
    if value < minimum or (strict and value == minimum):
        return f"must be {'>' if strict else '>='} {minimum:g}, got {value}"
    return None


class _Reader:
    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, node: _Node, key: str, message: str) -> RunError:
        return RunError(f"{self.where}:{node.key_line or node.line}: {key}: {message}")

    def expect(self, node: _Node, kinds: tuple[type, ...], key: str, what: str) -> Any:
        value = node.value
        if isinstance(value, bool) and bool not in kinds:
            ok = False
        else:
            ok = isinstance(value, kinds)
        if not ok:
            got = "nothing" if value is None else f"{type(value).__name__} {value!r}"
            raise self.fail(node, key, f"expected {what}, got {got}.")
        return value

    def number(self, node: _Node, key: str, *, integer: bool = False, minimum: float = 0.0,
               strict: bool = False) -> Any:
        kinds: tuple[type, ...] = (int,) if integer else (int, float)
        value = self.expect(node, kinds, key, "an integer" if integer else "a number")
        problem = number_problem(value, integer=integer, minimum=minimum, strict=strict)
        if problem:
            raise self.fail(node, key, f"{problem}.")
        return value

    def keys(self, node: _Node, allowed: tuple[str, ...], key: str) -> dict[str, _Node]:
        mapping: dict[str, _Node] = self.expect(node, (dict,), key or "(top level)", "a mapping")
        for k, v in mapping.items():
            full = f"{key}.{k}" if key else k
            if k.lower() in _SECRET_KEYS:
                raise self.fail(v, full, "never put a key in a config file (it would be copied into run.json "
                                "and shared with results). Name the environment variable that holds it: "
                                "api_key_env: OPENAI_API_KEY.")
            if k not in allowed:
                raise self.fail(v, full, f"unknown key.{closest(k, allowed)} Valid keys: {', '.join(allowed)}.")
        return mapping

    def params(self, node: _Node, key: str) -> dict[str, Any]:
        mapping = self.expect(node, (dict,), key, "a mapping of generation parameters")
        out: dict[str, Any] = {}
        for k, v in mapping.items():
            if k.lower() in _SECRET_KEYS or k in ("api_base", "timeout", "max_retries", "num_retries"):
                where = "api_key_env: VAR" if k.lower() in _SECRET_KEYS else f"{k}: on the model"
                raise self.fail(v, f"{key}.{k}", f"not a generation parameter; write {where} instead.")
            if k in PARAM_BOUNDS:
                out[k] = self.number(v, f"{key}.{k}", **PARAM_BOUNDS[k])
            else:
                out[k] = _plain(v)
        return out


def _model(r: _Reader, node: _Node, key: str, defaults: dict[str, _Node]) -> dict[str, Any]:
    if isinstance(node.value, str):
        node = _Node({"name": _Node(node.value, node.line, node.line)}, node.line)
    m = r.keys(node, _MODEL_KEYS, key)
    merged: dict[str, _Node] = {**defaults, **m}
    if "name" not in m:
        raise r.fail(node, key, "a model needs a name (a litellm model string, local/smollm2-135m, ...).")
    out: dict[str, Any] = {"name": r.expect(m["name"], (str,), f"{key}.name", "a model string")}
    if "api_key_env" in merged:
        out["api_key_env"] = r.expect(merged["api_key_env"], (str,), f"{key}.api_key_env", "a string")
    if "api_base" in merged and merged["api_base"].value is not None:
        out["api_base"] = _api_base(r, merged["api_base"], f"{key}.api_base")
    if "api_key_env" in out and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", out["api_key_env"]):
        raise r.fail(merged["api_key_env"], f"{key}.api_key_env",
                     "must be the NAME of an environment variable (e.g. OPENAI_API_KEY), not a key.")
    out["params"] = _model_params(r, m, key, defaults)
    out.update(_model_limits(r, merged, key))
    if "constraints" in merged and merged["constraints"].value is not None:
        out["constraints"] = _constraints(r, merged["constraints"], f"{key}.constraints")
    if "batch" in merged and merged["batch"].value is not None:
        out["batch"] = _batch_options(r, merged["batch"], f"{key}.batch")
    return out


def _model_params(r: _Reader, m: dict[str, _Node], key: str, defaults: dict[str, _Node]) -> dict[str, Any]:
    """A model's generation parameters: those of ``defaults``, overridden by its own, key by key."""
    params: dict[str, Any] = {}
    if "params" in defaults:
        params.update(r.params(defaults["params"], "defaults.params"))
    if "params" in m:
        params.update(r.params(m["params"], f"{key}.params"))
    return params


def _model_limits(r: _Reader, merged: dict[str, _Node], key: str) -> dict[str, Any]:
    """A model's ``concurrency``, ``rpm``, ``tpm`` and ``timeout`` that are given, checked against their bounds."""
    out: dict[str, Any] = {}
    if "concurrency" in merged:
        out["concurrency"] = r.number(merged["concurrency"], f"{key}.concurrency", **_bounds("concurrency"))
    for k in ("rpm", "tpm", "timeout"):
        if k in merged and merged[k].value is not None:
            out[k] = float(r.number(merged[k], f"{key}.{k}", **_bounds(k)))
    return out


def _constraints(r: _Reader, node: _Node, key: str) -> str:
    """A model's ``constraints``: one of ``CONSTRAINTS``."""
    value = r.expect(node, (str,), key, "a string")
    if value not in CONSTRAINTS:
        raise r.fail(node, key, f"{value!r} is not one of {', '.join(CONSTRAINTS)}.{closest(value, CONSTRAINTS)}")
    return str(value)


def _batch_options(r: _Reader, node: _Node, key: str) -> dict[str, Any]:
    """A model's ``batch:`` options (``BATCH_OPTIONS``): the limits positive integers, the others strings."""
    options = r.keys(node, BATCH_OPTIONS, key)
    batch: dict[str, Any] = {}
    for k, v in options.items():
        if k in ("max_requests", "max_bytes", "min_requests", "timeout_hours"):
            batch[k] = r.number(v, f"{key}.{k}", integer=True, minimum=1)
        else:
            batch[k] = r.expect(v, (str,), f"{key}.{k}", "a string")
    return batch


def _bounds(key: str) -> Mapping[str, Any]:
    """The bounds ``RunOptions`` declares for ``key`` (a model's limits are options for every model too)."""
    return declared(RunOptions)[key].bounds or {}


def _api_base(r: _Reader, node: _Node, key: str) -> str | tuple[str, ...]:
    """A model's ``api_base``: one URL, or a non-empty list of distinct URLs (replicas of the model)."""
    if isinstance(node.value, str):
        problem = api_base_problem(node.value)
        if problem:
            raise r.fail(node, key, f"{problem}.")
        return node.value
    items = r.expect(node, (list,), key, "a URL or a list of URLs")
    if not items:
        raise r.fail(node, key, "empty list: give at least one URL, or leave api_base out.")
    urls: list[str] = []
    for i, item in enumerate(items):
        url = r.expect(item, (str,), f"{key}[{i}]", "a URL string")
        problem = api_bases_problem([*urls, url])
        if problem:
            raise r.fail(item, f"{key}[{i}]", f"{problem}.")
        urls.append(url)
    return tuple(urls)


def _option_value(r: _Reader, node: _Node, key: str, option: Option, base: Path) -> Any:
    """A run option's value in a run config, checked as its declaration says (``RunOptions``)."""
    if option.path:
        value = r.expect(node, (str,), key, "a path")
        return str(base / value) if not Path(value).is_absolute() else value
    if option.switch:
        return r.expect(node, (bool,), key, "true or false")
    if option.many:
        items = r.expect(node, (list,), key, "a list of ids")
        return tuple(r.expect(i, (str,), f"{key}[{j}]", "an id string") for j, i in enumerate(items))
    if option.bounds is not None:
        number = r.number(node, key, **option.bounds)
        return number if option.bounds.get("integer") else float(number)
    value = r.expect(node, (str,), key, "a string")
    if option.choices is not None and value not in option.choices:
        raise r.fail(node, key, f"{value!r} is not one of {', '.join(option.choices)}.{closest(value, option.choices)}")
    return value


def _sources(r: _Reader, top: dict[str, _Node], base: Path) -> dict[str, Any]:
    """A run config's ``grid`` and ``dataset`` (both required), a grid file or a ``jsonl:`` path made relative
    to the config's folder ``base``."""
    out: dict[str, Any] = {}
    for k in ("grid", "dataset"):
        if k not in top:
            raise RunError(f"{r.where}:1: {k}: missing. A run config names a grid, a dataset and models.")
        out[k] = r.expect(top[k], (str,), k, "a string")
    if out["grid"].endswith((".yaml", ".yml")) and not Path(out["grid"]).is_absolute():
        out["grid"] = str(base / out["grid"])
    if out["dataset"].startswith("jsonl:") and not Path(out["dataset"][6:]).is_absolute():
        out["dataset"] = "jsonl:" + str(base / out["dataset"][6:])
    return out


def load_run_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and validate a run config YAML into plain, checked values.

    Returns a dict of RunConfig fields (models as dicts of ModelSpec fields);
    ``session.build_config`` merges options (flags, ``promptgrid.run``'s
    keywords) over it and builds the RunConfig. Paths inside are resolved
    relative to the file.
    """
    p = Path(path)
    where = str(p)
    text = read_yaml_text(p, where, RunError, MAX_GRID_BYTES, "run configs")
    top_node = compose_yaml(text, where, RunError)
    if top_node is None:
        raise RunError(f"{where}:1: the run config is empty. It needs at least grid, dataset and models.")
    r = _Reader(where)
    top = r.keys(top_node, _TOP_KEYS, "")
    base = p.parent
    out = _sources(r, top, base)
    for k, option in declared(RunOptions).items():  # the run options a file holds (models: below)
        if option.file and k != "models" and k in top and top[k].value is not None:
            out[k] = _option_value(r, top[k], k, option, base)
    defaults = r.keys(top["defaults"], tuple(k for k in _MODEL_KEYS if k != "name"), "defaults") \
        if "defaults" in top else {}
    if "models" not in top:
        raise RunError(f"{where}:1: models: missing. List at least one model, e.g. models: [openai/gpt-4o-mini].")
    models = r.expect(top["models"], (list,), "models", "a list of models")
    if not models:
        raise r.fail(top["models"], "models", "empty list: name at least one model.")
    out["models"] = [_model(r, m, f"models[{i}]", defaults) for i, m in enumerate(models)]
    names = [m["name"] for m in out["models"]]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise r.fail(models[i], f"models[{i}].name", f"model {name!r} is listed twice.")
    return out
