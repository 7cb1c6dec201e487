"""The jobs of a run: models x cases x variants x repeats, streamed, each with its key.

A job's key is what the result store caches on; it hashes exactly what
changes a model's output (``job_key``). Jobs are generated lazily, case by
case, so a 100,000-job plan never sits in memory: the renderer caches per-case
function docs, and the runner pulls jobs in chunks.

Order: for each model, case outer, variant inner, repeat innermost. A run
stopped half-way (Ctrl-C, ``--max-cost``) then has every variant on the same
first cases, so its partial accuracies still compare variants fairly.

The plan's size is counted before anything is built (``check_plan_size``,
``MAX_JOBS``), as the grid's is: ``--repeats 100000000`` is refused at once
with the numbers, instead of filling memory.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from promptgrid.errors import RunError
from promptgrid.records import Case, Prompt
from promptgrid.variants import Variant

__all__ = ["MAX_JOBS", "Job", "JobMaker", "Renders", "check_plan_size", "iter_jobs", "job_key", "repeat_params"]

MAX_JOBS = 5_000_000
"""Default cap on a run's jobs (models x variants x cases x repeats), counted before any job is built: about six
times the 864,000 calls of docs/large-study.md. ``--max-jobs N``, ``max_jobs: N`` in a run config or
``max_jobs=N`` (``build_config``, ``pg.run``) raises it."""

_CACHED_REPEATS = 1024  # per-repeat parameters kept for the plan's walk; beyond, made per job (memory stays flat)


def check_plan_size(models: int, repeats: int, variants: int | None = None, cases: int | None = None, *,
                    max_jobs: int = MAX_JOBS) -> int:
    """The number of jobs of a plan (at least, when ``variants`` or ``cases`` are not known yet), or ``RunError``
    naming the numbers and how to raise the cap when it is over ``max_jobs``. Nothing is built."""
    factors = [(models, "model"), (variants, "variant"), (cases, "case"), (repeats, "repeat")]
    known = [(n, what) for n, what in factors if n is not None]
    jobs = 1
    for n, _what in known:
        jobs *= n
    if jobs > max_jobs:
        shown = " x ".join(f"{n:,} {what}{'' if n == 1 else 's'}" for n, what in known)
        at_least = "" if len(known) == len(factors) else "at least "
        raise RunError(f"the plan is {shown} = {at_least}{jobs:,} jobs, over the cap of {max_jobs:,} jobs. Use fewer "
                       "repeats, cases (--limit) or variants, or raise the cap (--max-jobs N; max_jobs: N in a run "
                       "config).")
    return jobs


def job_key(model: str, params: Mapping[str, Any], messages_sha256: str, repeat: int) -> str:
    """The cache key of one model call: sha256 over what changes the output.

    Included: the model string, the generation parameters actually sent
    (temperature, max_tokens, seed -- already offset by the repeat --, top_p,
    and any extra provider parameter), the messages (by their sha256, see
    ``Prompt.sha256``, which covers the request pieces -- tools, schema,
    grammar -- of native and constrained prompts) and the repeat index.

    Excluded, because they change how or where a call is made but not what
    the model answers: ``api_base`` and ``api_key_env`` (moving a server does
    not change its model; name models differently to keep results apart),
    API keys, timeout, retries and backoff, concurrency, rpm/tpm limits,
    ``--max-cost``, the variant id and case id (identical prompts from
    different variants share one call), and the promptgrid version.
    """
    payload = json.dumps(
        {"model": model, "params": {k: params[k] for k in sorted(params)}, "messages": messages_sha256,
         "repeat": repeat},
        sort_keys=True, separators=(",", ":"), default=str,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def repeat_params(params: Mapping[str, Any], repeat: int) -> dict[str, Any]:
    """The parameters of repeat ``repeat``: the seed, if any, becomes seed + repeat."""
    out = dict(params)
    if out.get("seed") is not None:
        out["seed"] = int(out["seed"]) + repeat
    return out


@dataclass(frozen=True, slots=True)
class Job:
    """One (model, variant, case, repeat) row and the call that answers it."""

    model: str
    variant: Variant
    variant_id: str
    case: Case
    repeat: int
    key: str
    params: Mapping[str, Any]
    messages: tuple[dict[str, str], ...]
    prompt_sha256: str
    request: Mapping[str, Any] | None = None
    """``Prompt.request``: tools, schema or grammar sent beside the messages; ``None`` in prompt call mode."""


class Renders(Protocol):
    def render(self, variant: Variant, case: Case) -> Prompt: ...


def iter_jobs(model: str, params: Mapping[str, Any], variants: Sequence[Variant], cases: Sequence[Case],
              repeats: int, renderer: Renders) -> Iterator[Job]:
    """Every job of one model, lazily (one prompt rendered at a time; memory does not grow with ``repeats``)."""
    per_repeat = [repeat_params(params, r) for r in range(min(repeats, _CACHED_REPEATS))]
    cached = len(per_repeat)
    variant_ids = [v.id for v in variants]
    for case in cases:
        for variant, vid in zip(variants, variant_ids, strict=True):
            prompt = renderer.render(variant, case)
            digest = prompt.sha256
            for r in range(repeats):
                p = per_repeat[r] if r < cached else repeat_params(params, r)
                yield Job(model, variant, vid, case, r, job_key(model, p, digest, r), p, prompt.messages, digest,
                          prompt.request)


class JobMaker:
    """Turns a planner's cells ``(variant index, case index, repeat)`` into the jobs ``iter_jobs`` would make.

    The last prompt rendered is kept, so the cells of one (variant, case) in a row (its repeats) render it once;
    the parameters of the first ``_CACHED_REPEATS`` repeats are made once.
    """

    def __init__(self, model: str, params: Mapping[str, Any], variants: Sequence[Variant], cases: Sequence[Case],
                 renderer: Renders) -> None:
        self.model, self.params, self.variants, self.cases, self.renderer = model, params, variants, cases, renderer
        self._ids = [v.id for v in variants]
        self._per_repeat: dict[int, dict[str, Any]] = {}
        self._last: tuple[int, int, Prompt] | None = None

    def _params(self, repeat: int) -> dict[str, Any]:
        p = self._per_repeat.get(repeat)
        if p is None:
            p = repeat_params(self.params, repeat)
            if len(self._per_repeat) < _CACHED_REPEATS:
                self._per_repeat[repeat] = p
        return p

    def __call__(self, cells: Sequence[tuple[int, int, int]]) -> list[Job]:
        out = []
        model = self.model
        for v, c, r in cells:
            last = self._last
            if last is not None and last[0] == v and last[1] == c:
                prompt = last[2]
            else:
                prompt = self.renderer.render(self.variants[v], self.cases[c])
                self._last = (v, c, prompt)
            digest = prompt.sha256
            p = self._params(r)
            out.append(Job(model, self.variants[v], self._ids[v], self.cases[c], r, job_key(model, p, digest, r), p,
                           prompt.messages, digest, prompt.request))
        return out
