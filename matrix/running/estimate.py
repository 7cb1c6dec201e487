"""What a run would send and cost, computed without calling anything (``promptgrid run --dry-run``).

One record for both kinds of run (``PlanEstimate``, ``ModelEstimate``): a single-turn plan's jobs and calls
(``estimate``), or a conversation plan's episodes and steps (``estimate_conversations``, below).

An adaptive run (``--goal``/``--budget``) chooses its cells round by round from results the dry run does not
have: its counts are the product's scaled to the budget (``ModelEstimate.product`` says so).

For each model the plan is walked as the runner walks it: a job whose call
is already in the store costs nothing, a job whose prompt repeats one seen
earlier in the plan shares that call, every other job is a call to send.
Input tokens are estimated as prompt characters / 4, the tool schemas of a
native request included (``ratelimit.estimate_tokens``); cost comes from
litellm's price list (free for local and fake models, unknown for models
litellm has no price for). The credentials each model's provider needs are
checked in the environment (``providers.missing_credentials``: names only,
offline), so a missing key shows before the run, not at its first call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import ModelSpec
from .ratelimit import estimate_tokens
from .session import Prepared, has_store, run_sync
from .store import UNSUPPORTED, RunStore

__all__ = ["DRY_RUN_PAIRS", "Estimate", "ModelEstimate", "PlanEstimate", "estimate", "estimate_conversations"]

_BATCH = 500


@dataclass(frozen=True)
class ModelEstimate:
    """One model's share of the plan."""

    model: str
    jobs: int
    stored: int
    """Jobs whose call already has a result in the run directory."""
    shared: int
    """Jobs whose prompt is identical to an earlier job's: they share its call."""
    calls: int
    """Calls that would be sent."""
    input_tokens: int
    output_tokens_max: int
    """``calls`` x ``max_tokens``: the most the answers can bill."""
    cost_input: float | None
    """USD for the input tokens; ``None`` when the price is unknown."""
    cost_max: float | None
    """USD with every answer at ``max_tokens``; ``None`` when the price is unknown."""
    missing_env: tuple[str, ...] = ()
    """Credential variables the model's provider needs that are not set (none for local, fake or
    ``api_base`` models)."""
    unsupported: int = 0
    """Jobs that would not be sent: the model cannot do their call mode (``ModelClient.unsupported``)."""
    batch_cost_input: float | None = None
    """``cost_input`` at the model's batch price (``--batch``); ``None`` without a batch API or a known price."""
    batch_cost_max: float | None = None
    """``cost_max`` at the batch price."""
    product: int | None = None
    """An adaptive run (``goal``): the jobs of the whole product; the counts above are the product's scaled to
    the budget (which cells the rounds choose is not known before they run). None: the counts are exact."""


@dataclass(frozen=True)
class PlanEstimate:
    """The whole plan: per model, and totals (unknown prices count 0 in the totals).

    Not ``findings.Estimate`` (one number with its interval, which an adaptive run reports).
    """

    models: tuple[ModelEstimate, ...]
    variants: int
    cases: int
    repeats: int
    run_dir: Path
    kind: str = "single"
    """``single`` (the counts are jobs and calls) or ``conversation`` (episodes and steps: ``jobs`` counts
    episodes, ``calls`` the steps to send, ``cases`` the conversations; ``estimate_conversations``)."""
    played: int = 0
    """A conversation plan: the (variant, conversation) pairs whose ground-truth path was played for the step
    and token counts (all of them, or an even spread of at most ``DRY_RUN_PAIRS``)."""

    @property
    def jobs(self) -> int:
        return sum(m.jobs for m in self.models)

    @property
    def stored(self) -> int:
        return sum(m.stored for m in self.models)

    @property
    def shared(self) -> int:
        return sum(m.shared for m in self.models)

    @property
    def calls(self) -> int:
        return sum(m.calls for m in self.models)

    @property
    def input_tokens(self) -> int:
        return sum(m.input_tokens for m in self.models)

    @property
    def output_tokens_max(self) -> int:
        return sum(m.output_tokens_max for m in self.models)

    @property
    def cost_input(self) -> float:
        return sum(m.cost_input or 0.0 for m in self.models)

    @property
    def cost_max(self) -> float:
        return sum(m.cost_max or 0.0 for m in self.models)

    @property
    def missing_env(self) -> dict[str, tuple[str, ...]]:
        """Models whose credentials are not in the environment -> the variables to set."""
        return {m.model: m.missing_env for m in self.models if m.missing_env}

    @property
    def unpriced(self) -> tuple[str, ...]:
        """Models litellm has no price for."""
        return tuple(m.model for m in self.models if m.cost_input is None)


Estimate = PlanEstimate
"""The former name of ``PlanEstimate``, an alias kept for code that imports it (``findings.Estimate``, a number
with its interval, is the record named ``Estimate``)."""


def estimate(prep: Prepared) -> PlanEstimate:
    """Count jobs, stored results, shared prompts, tokens and cost of a prepared run; call nothing."""
    from .plan import iter_jobs

    config = prep.config
    store = RunStore(config.run_dir, readonly=True) if has_store(config.run_dir) else None
    per_model = []
    try:
        for spec in config.models:
            seen: set[bytes] = set()
            counts = [0, 0, 0, 0, 0, 0]  # jobs, stored, shared, calls, input tokens, unsupported
            batch: list[Any] = []
            client = _price_client(spec)
            for job in iter_jobs(spec.name, spec.params, prep.variants, prep.cases, config.repeats, prep.renderer):
                batch.append(job)
                if len(batch) >= _BATCH:
                    _count(batch, store, seen, counts, client.unsupported)
                    batch = []
            _count(batch, store, seen, counts, client.unsupported)
            product = counts[0]
            if config.goal is not None and config.budget is not None and product > config.budget:
                counts = _scaled(counts, config.budget / product)
            jobs, stored, shared, calls, in_tok, unsupported = counts
            per_model.append(_priced(spec, client, jobs, stored, shared, calls, in_tok, unsupported, product))
    finally:
        if store is not None:
            store.close()
    return PlanEstimate(tuple(per_model), len(prep.variants), len(prep.cases), config.repeats, Path(config.run_dir))


#: The most (variant, conversation) pairs a conversation dry run plays; a larger plan is estimated from an even
#: spread of this many (every n-th pair of the variant-major order, so every variant and category is in it).
DRY_RUN_PAIRS = 2000


@dataclass(frozen=True)
class _Path:
    """The ground truth's path through one (variant, conversation) pair: its steps, their estimated input
    tokens (the messages and tool schemas of each step, characters / 4), and the request pieces of its first step."""

    steps: int
    input_tokens: int
    request: Any


def estimate_conversations(config: Any, variants: Sequence[Any], conversations: Sequence[Any], renderer: Any,
                           ) -> PlanEstimate:
    """What a conversation run of ``config`` would send and cost, calling nothing (``--dry-run``).

    A conversation's steps are known only as it runs, so they are counted on the ground truth's path: each (variant,
    conversation) pair is played offline by ``fake/ground-truth`` on its environment (the ``Episode`` a run plays, its
    messages rendered as the run renders them), each step's messages (and a native request's tool schemas) counted as
    characters / 4, the single-turn estimate's rule. That is a model that solves every turn in the fewest steps: a model
    that errs takes more, up to ``max_steps`` a turn. Per model, the episodes already settled in the run directory (a
    verdict, or an error a plain re-run keeps) cost nothing, those whose first request the model cannot be sent
    (``unsupported``) are not sent, and every other episode costs the mean of the played pairs it can be sent;
    ``max_tokens`` bounds each step's output, as each call's in a single-turn plan. An adaptive goal scales the
    product's counts to its budget. At most ``DRY_RUN_PAIRS`` pairs are played."""
    pairs = [(v, c) for v in variants for c in conversations]
    step = max(1, -(-len(pairs) // DRY_RUN_PAIRS))
    sample = pairs[::step]
    paths = run_sync(_ground_truth_paths(sample, renderer, step_limit=config.max_steps,
                                         strict_arguments=config.strict_arguments), "promptgrid-estimate")
    settled = _settled_episodes(config.run_dir)
    cells = {(v.id, c.id) for v, c in pairs}
    per_model = []
    for spec in config.models:
        client = _price_client(spec)
        product = len(pairs) * config.repeats
        stored = sum(1 for (model, vid, cid, repeat) in settled
                     if model == spec.name and (vid, cid) in cells and repeat < config.repeats)
        sendable = [path for path in paths if path.request is None or not client.unsupported(path.request)]
        unsupported_share = 1 - len(sendable) / len(paths) if paths else 0.0
        jobs = product
        if config.goal is not None and config.budget is not None and product > config.budget:
            jobs, stored = config.budget, round(stored * config.budget / product)
        unsupported = round((jobs - stored) * unsupported_share)
        to_run = max(0, jobs - stored - unsupported)
        calls = round(to_run * sum(p.steps for p in sendable) / len(sendable)) if sendable else 0
        in_tok = round(to_run * sum(p.input_tokens for p in sendable) / len(sendable)) if sendable else 0
        per_model.append(_priced(spec, client, jobs, stored, 0, calls, in_tok, unsupported, product))
    return PlanEstimate(tuple(per_model), len(variants), len(conversations), config.repeats, Path(config.run_dir),
                        kind="conversation", played=len(sample))


async def _ground_truth_paths(sample: Sequence[tuple[Any, Any]], renderer: Any, *, step_limit: int,
                              strict_arguments: bool) -> list[_Path]:
    """The ground truth's path through each pair of ``sample`` (``_Path``), played 8 at a time."""
    import asyncio

    from promptgrid.matrix.clients._scripted import ScriptedClient
    from promptgrid.matrix.episodes._conversation_play import ConversationEpisode
    from promptgrid.matrix.episodes._environment import warm_up
    from promptgrid.records import Step
    from promptgrid.variants import CallMode

    warm_up()
    truth = ScriptedClient("fake/ground-truth")
    episode = ConversationEpisode(renderer, step_limit=step_limit, strict_arguments=strict_arguments)
    gate = asyncio.Semaphore(8)

    async def one(variant: Any, conversation: Any) -> _Path:
        counts = [0, 0]
        first: list[Any] = []

        async def send(asked: Any) -> tuple[Step, bool]:
            from promptgrid.matrix.clients import stored_response

            if not first:
                first.append(asked.request)
            counts[0] += 1
            counts[1] += estimate_tokens(asked.messages, None, asked.request) + 1
            completion = await truth.complete(list(asked.messages), {}, request=asked.request, episode=asked.context)
            native = variant.call_mode is CallMode.NATIVE
            return Step(response=stored_response(completion, native=native)), True

        async with gate:
            await episode.run(truth.name, variant, conversation, 0, send)
        return _Path(counts[0], counts[1], first[0] if first else None)

    return list(await asyncio.gather(*(one(v, c) for v, c in sample)))


def _settled_episodes(run_dir: Any) -> set[tuple[str, str, str, int]]:
    """(model, variant id, conversation id, repeat) of the episodes a plain run into ``run_dir`` would not play
    again (a verdict, or an error); none when it holds no conversation store."""
    from promptgrid.matrix.running.store import conversation_store
    from promptgrid.matrix.running.store_episodes import CONVERSATION_STORE

    if not (Path(run_dir) / CONVERSATION_STORE).is_file():
        return set()
    with conversation_store(run_dir) as store:
        return {(e.model, e.variant_id, e.conversation_id, e.repeat) for e in store.episodes()
                if e.kept()}


def _priced(spec: ModelSpec, client: Any, jobs: int, stored: int, shared: int, calls: int, in_tok: int,
            unsupported: int, product: int) -> ModelEstimate:
    """One model's ``ModelEstimate`` from its counts (either kind's): ``max_tokens`` of output per call, the
    online and batch prices of the tokens, the credentials not set; ``product`` kept when the counts are a
    budget's share of it."""
    max_out = calls * int(spec.params.get("max_tokens") or 0)
    batch_price = _batch_price(spec, client)
    return ModelEstimate(spec.name, jobs, stored, shared, calls, in_tok, max_out,
                         client.price(in_tok, 0), client.price(in_tok, max_out), _missing_env(spec), unsupported,
                         batch_price(in_tok, 0) if batch_price else None,
                         batch_price(in_tok, max_out) if batch_price else None,
                         product if jobs < product else None)


def _scaled(counts: list[int], share: float) -> list[int]:
    """An adaptive budget's expected counts: the product's, times the share of it the budget is (the jobs exactly)."""
    jobs = round(counts[0] * share)
    stored, shared, calls = (min(jobs, round(c * share)) for c in counts[1:4])
    return [jobs, stored, shared, calls, round(counts[4] * share), round(counts[5] * share)]


def _count(batch: list[Any], store: RunStore | None, seen: set[bytes], counts: list[int],
           unsupported: Any) -> None:
    """Add a batch of jobs to ``counts`` (jobs, stored, shared, calls, input tokens, unsupported)."""
    stored = store.lookup([j.key for j in batch]) if store is not None and batch else {}
    for job in batch:
        counts[0] += 1
        digest = bytes.fromhex(job.key)[:16]
        request = getattr(job, "request", None)
        if request is not None and stored.get(job.key) in (None, UNSUPPORTED) and unsupported(request):
            counts[5] += 1
        elif job.key in stored and stored[job.key] != UNSUPPORTED:  # unsupported before, sendable now: a call
            counts[1] += 1
        elif digest in seen:
            counts[2] += 1
        else:
            seen.add(digest)
            counts[3] += 1
            counts[4] += estimate_tokens(job.messages, None, request) + 1


class _Free:
    """Local and fake models cost nothing; what they cannot send needs no client (nor llama-cpp) to tell."""

    def __init__(self, local: bool) -> None:
        self.local = local

    def price(self, input_tokens: int, output_tokens: int) -> float:
        return 0.0

    def unsupported(self, request: Any) -> str | None:
        if not self.local:
            return None  # fake models answer every call mode
        from promptgrid.matrix.clients._local import local_unsupported

        return local_unsupported(request)


def _missing_env(spec: ModelSpec) -> tuple[str, ...]:
    from promptgrid.matrix.clients import provider_of

    if provider_of(spec.name) != "litellm":
        return ()
    from promptgrid.providers import missing_credentials

    return missing_credentials(spec.name, api_base=spec.api_base, api_key_env=spec.api_key_env)


def _batch_price(spec: ModelSpec, client: Any) -> Any:
    """The price function of the model's batch API (``BatchBackend.price``), or None when it has none."""
    from promptgrid.errors import RunError
    from promptgrid.matrix.clients import make_batch_backend
    from promptgrid.matrix.clients._litellm import LiteLLMClient

    if not isinstance(client, LiteLLMClient):
        return None
    try:
        backend = make_batch_backend(client, spec.batch)
    except RunError:  # batch options incomplete (Bedrock's role and bucket): the run says so; price it anyway
        return lambda i, o: None if (p := client.price(i, o)) is None else p * 0.5
    return None if backend is None else backend.price


def _price_client(spec: ModelSpec) -> Any:
    from promptgrid.matrix.clients import provider_of

    provider = provider_of(spec.name)
    if provider != "litellm":
        return _Free(provider == "local")
    from promptgrid.matrix.clients._litellm import LiteLLMClient

    return LiteLLMClient(spec.name, api_base=spec.api_base, constraints=spec.constraints)
