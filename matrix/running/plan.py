"""The jobs of a run: models x cases x variants x repeats, streamed, each with its key.

A job's key is what the result store caches on; it hashes exactly what
changes a model's output (``job_key``). Jobs are generated lazily, case by
case, so a 100,000-job plan never sits in memory: the renderer caches per-case
function docs, and the runner pulls jobs in chunks.

Order: for each model, case outer, variant inner, repeat innermost. A run
stopped half-way (Ctrl-C, ``--max-cost``) then has every variant on the same
first cases, so its partial accuracies still compare variants fairly.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from promptgrid.records import Case, Prompt
from promptgrid.variants import Variant

__all__ = ["Job", "Renders", "iter_jobs", "job_key", "repeat_params"]


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
    """Every job of one model, lazily (one prompt rendered at a time)."""
    per_repeat = [repeat_params(params, r) for r in range(repeats)]
    variant_ids = [v.id for v in variants]
    for case in cases:
        for variant, vid in zip(variants, variant_ids):
            prompt = renderer.render(variant, case)
            digest = prompt.sha256
            for r in range(repeats):
                p = per_repeat[r]
                yield Job(model, variant, vid, case, r, job_key(model, p, digest, r), p, prompt.messages, digest,
                          prompt.request)
