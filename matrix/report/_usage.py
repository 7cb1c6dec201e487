"""Failure modes with examples, cost, latency and output speed, calls per endpoint."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from promptgrid.matrix.report import stats
from promptgrid.matrix.running.results import ResultRow
from promptgrid.variants import DIMENSIONS

from ._matrix import ModelData, ci_of, quiet_nan
from ._model import Cell, CostSummary, EndpointSummary, FailureCount, FailureExample, SpeedPoint, VariantInfo

__all__ = ["EXAMPLES_PER_MODE", "EXAMPLE_CHARS", "cost_summary", "endpoint_summaries", "failure_stats", "speed_points"]

UNKNOWN_ENDPOINT = "(unknown)"

EXAMPLES_PER_MODE = 3
EXAMPLE_CHARS = 400


def failure_mode(j: ResultRow) -> str:
    if j.failure_mode:
        return j.failure_mode
    if j.error is not None:
        return "call_error"
    return (j.error_code or "unknown").lower()


def failure_stats(
    jobs: Sequence[ResultRow], order: Sequence[str], infos: Mapping[str, VariantInfo], cells: Sequence[Cell]
) -> tuple[list[FailureCount], list[FailureExample]]:
    """Failed jobs counted per model x variant x mode, and up to ``EXAMPLES_PER_MODE`` examples per mode."""
    rank = {v: i for i, v in enumerate(order)}
    failed = [j for j in jobs if j.scored and not j.correct]
    failed.sort(key=lambda j: (j.model, rank.get(j.variant_id, 1 << 30), j.case_id, j.repeat))
    counts = Counter((j.model, j.variant_id, failure_mode(j)) for j in failed)
    n_by_cell = {(c.model, c.variant_id): c.n for c in cells}
    out_counts = [
        FailureCount(m, v, infos[v].label, mode, n, n / n_by_cell[(m, v)] if n_by_cell.get((m, v)) else math.nan)
        for (m, v, mode), n in sorted(
            counts.items(), key=lambda kv: (kv[0][0], rank.get(kv[0][1], 1 << 30), -kv[1], kv[0][2])
        )
    ]
    examples: list[FailureExample] = []
    by_mode: dict[str, list[ResultRow]] = defaultdict(list)
    for j in failed:
        by_mode[failure_mode(j)].append(j)
    for mode in sorted(by_mode, key=lambda m: (-len(by_mode[m]), m)):
        examples += [
            FailureExample(
                mode, j.model, j.variant_id, infos[j.variant_id].label, j.case_id, j.repeat, _example_text(j)
            )
            for j in _pick_examples(by_mode[mode])
        ]
    return out_counts, examples


def _pick_examples(failed: Sequence[ResultRow]) -> list[ResultRow]:
    """Up to ``EXAMPLES_PER_MODE`` of one mode's failures: round-robin over models, one per model x variant first."""
    queues = defaultdict(list)
    for j in failed:
        queues[j.model].append(j)
    picked: list[ResultRow] = []
    seen: set[tuple[str, str]] = set()
    for distinct in (True, False):
        progress = True
        while len(picked) < EXAMPLES_PER_MODE and progress:
            progress = _pick_round(queues, picked, seen, distinct)
    return picked


def _pick_round(
    queues: Mapping[str, list[ResultRow]], picked: list[ResultRow], seen: set[tuple[str, str]], distinct: bool
) -> bool:
    """One round of ``_pick_examples``: each model in turn adds its first eligible job; whether any was added."""
    progress = False
    for model in sorted(queues):
        for j in queues[model]:
            if any(j is p for p in picked) or (distinct and (j.model, j.variant_id) in seen):
                continue
            picked.append(j)
            seen.add((j.model, j.variant_id))
            progress = True
            break
        if len(picked) >= EXAMPLES_PER_MODE:
            break
    return progress


def _example_text(j: ResultRow) -> str:
    """What a failure example shows: the call's error or the response, cut to ``EXAMPLE_CHARS``."""
    text = f"error: {j.error}" if j.error is not None else j.response or ""
    if len(text) > EXAMPLE_CHARS:
        text = text[:EXAMPLE_CHARS] + " [...]"
    return text


def calls_of(jobs: Iterable[ResultRow]) -> list[ResultRow]:
    """One job per model call: identical prompts across variants share a call (same key) and its cost.

    Unsupported jobs were never sent: no call."""
    seen: set[tuple[str, str]] = set()
    out = []
    for j in jobs:
        if j.status == "unsupported":
            continue
        if j.key is not None:
            if (j.model, j.key) in seen:
                continue
            seen.add((j.model, j.key))
        out.append(j)
    return out


def speed_of(jobs: Iterable[ResultRow]) -> float:
    out_tok = lat = 0.0
    for j in calls_of(jobs):
        if j.error is None and j.output_tokens is not None and j.latency_s and j.latency_s > 0:
            out_tok += j.output_tokens
            lat += j.latency_s
    return out_tok / lat if lat > 0 else math.nan


def cost_summary(model: str, all_jobs: Sequence[ResultRow]) -> CostSummary:
    jobs = calls_of(all_jobs)
    costs = [j.cost_usd for j in jobs if j.cost_usd is not None]
    lat = [j.latency_s for j in jobs if j.latency_s is not None]
    return CostSummary(
        model=model,
        calls=len(jobs),
        errors=sum(j.error is not None for j in jobs),
        input_tokens=sum(j.input_tokens or 0 for j in jobs),
        output_tokens=sum(j.output_tokens or 0 for j in jobs),
        cost_usd=float(sum(costs)) if costs else None,
        latency_p50=stats.percentile(lat, 50),
        latency_p95=stats.percentile(lat, 95),
        output_tokens_per_s=speed_of(jobs),
    )


def endpoint_summaries(jobs: Sequence[ResultRow]) -> list[EndpointSummary]:
    """Calls, errors and mean latency per model and endpoint, for the models that used more than one endpoint
    (replicas given as a list of ``api_base``); counted per model call (``calls_of``)."""
    by_model: dict[str, dict[str, list[ResultRow]]] = defaultdict(lambda: defaultdict(list))
    for j in calls_of(jobs):
        if j.status in ("done", "error"):
            by_model[j.model][j.endpoint or UNKNOWN_ENDPOINT].append(j)
    out = []
    for model in sorted(by_model):
        endpoints = by_model[model]
        if len(set(endpoints) - {UNKNOWN_ENDPOINT}) < 2:
            continue
        for endpoint in sorted(endpoints):
            calls = endpoints[endpoint]
            answered = [j.latency_s for j in calls if j.error is None and j.latency_s is not None]
            out.append(EndpointSummary(model, endpoint, len(calls), sum(j.error is not None for j in calls),
                                       float(np.mean(answered)) if answered else math.nan))
    return out


def speed_points(
    md: ModelData, jobs: Sequence[ResultRow], infos: Mapping[str, VariantInfo], conf: float
) -> list[SpeedPoint]:
    by_template: dict[str, list[int]] = defaultdict(list)
    for col, vid in enumerate(md.vids):
        by_template[str(infos[vid].dimensions.get("template", DIMENSIONS["template"].default))].append(col)
    num, den = md.num["accuracy"], md.den["accuracy"]
    acc = num.sum(0) / den.sum(0)
    boot = md.boot()
    out = []
    for template, cols in by_template.items():
        vids = {md.vids[c] for c in cols}
        speed = speed_of(j for j in jobs if j.variant_id in vids)
        with quiet_nan():
            ci = ci_of(np.nanmean(boot[:, cols], axis=1), conf)
        out.append(SpeedPoint(md.model, template, float(acc[cols].mean()), ci, speed))
    return out
