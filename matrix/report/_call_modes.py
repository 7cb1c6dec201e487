"""Call modes in the report: unsupported jobs, the format tax, parse shares and failure modes per mode.

A variant's call mode (``prompt``, ``native``, ``constrained``; issue 13) is
its ``call_mode`` dimension; ``Variant.dimensions()`` leaves it out at the
default, so a missing value means ``prompt`` (``call_mode_of``).

- Unsupported jobs (never sent: the model cannot do the variant's call mode)
  are in no rate; ``unsupported_counts`` lists them per model, variant and reason.
- The format tax (``format_tax``): accuracy(mode) - accuracy(prompt) per model,
  paired on the same cases. A constrained variant is paired with the prompt
  variant that differs only in its call mode (same return format, doc format,
  tag and so on); a native variant, which has no return format, with the mean
  of the prompt variants that differ only in call mode and the format
  dimensions (``FORMAT_DIMENSIONS``). Interval: percentile bootstrap over
  cases with the model's shared resamples; test: the sign test (exact McNemar
  for one repeat) on the per-case mean difference, Holm over the model's modes.
- Parse share (``parse_shares``): per call mode and return format, the share of
  scored answers that parse as calls - answered (no failed call) and not failed
  for a format-level reason (``PARSE_FAILURE_MODES``); a valid answer counts
  as parsed, a correct "no call" on an irrelevance case included - beside the
  accuracy, both with Wilson intervals over jobs.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from promptgrid.matrix.running.results import ResultRow
from promptgrid.matrix.scoring.verdict import FailureMode
from promptgrid.variants import DIMENSIONS

from . import stats
from ._matrix import ModelData, ci_of
from ._model import FormatTax, ModeFailure, ParseShare, Settings, UnsupportedJobs, VariantInfo
from ._usage import failure_mode

__all__ = [
    "CALL_MODES",
    "FORMAT_DIMENSIONS",
    "PARSE_FAILURE_MODES",
    "call_mode_of",
    "call_modes_of",
    "format_tax",
    "mode_failures",
    "parse_shares",
    "parses_as_call",
    "unsupported_counts",
]

CALL_MODES = tuple(str(getattr(v, "value", v)) for v in DIMENSIONS["call_mode"].values or ())  # a closed set
"""The call modes in the dimension's order (prompt, native, constrained)."""
PROMPT = str(getattr(DIMENSIONS["call_mode"].default, "value", DIMENSIONS["call_mode"].default))
FORMAT_DIMENSIONS = ("return_format", "doc_format", "tool_call_tag")
"""The dimensions a native variant collapses (they do not apply without a prompt-side format)."""

PARSE_FAILURE_MODES = frozenset(m.value for m in (
    FailureMode.NO_CALL, FailureMode.PROSE_INSTEAD_OF_CALL, FailureMode.PER_CALL_TOOLCALL_WRAPPING,
    FailureMode.PER_CALL_FUNCTIONS_WRAPPING, FailureMode.PER_CALL_LIST_WRAPPING, FailureMode.TAG_MISSING,
    FailureMode.UNEXPECTED_TAG, FailureMode.OTHER_FORMAT, FailureMode.UNCLOSED_TAG, FailureMode.TRUNCATED,
    FailureMode.BAD_ESCAPING,
    FailureMode.CODE_FENCE, FailureMode.PROSE_AROUND_CALL, FailureMode.WRONG_XML_TYPE_NAMES,
    FailureMode.MALFORMED_CALL, FailureMode.BAD_TOOL_ARGUMENTS,
))
"""Failure modes that mean "no call in the requested format" (the parse failed or the answer is no call),
as opposed to a well-formed call with the wrong content."""


def call_mode_of(dimensions: Mapping[str, Any]) -> str:
    """The call mode of a variant's dimensions; missing means ``prompt`` (ids and dimensions omit the default)."""
    value = dimensions.get("call_mode", PROMPT)
    return str(getattr(value, "value", value))


def call_modes_of(infos: Sequence[VariantInfo]) -> list[str]:
    """The call modes the variants use, in the dimension's order."""
    seen = {call_mode_of(v.dimensions) for v in infos}
    return [m for m in CALL_MODES if m in seen] + sorted(seen - set(CALL_MODES))


def parses_as_call(j: ResultRow) -> bool:
    """A scored answer that parses as calls: no failed call and no format-level failure mode."""
    return j.error is None and (j.correct or failure_mode(j) not in PARSE_FAILURE_MODES)


def unsupported_counts(jobs: Sequence[ResultRow], order: Sequence[str],
                       infos: Mapping[str, VariantInfo]) -> list[UnsupportedJobs]:
    """Jobs never sent because the model cannot do the variant's call mode, per model, variant and reason."""
    rank = {v: i for i, v in enumerate(order)}
    counts = Counter((j.model, j.variant_id, j.error or "") for j in jobs if j.status == "unsupported")
    return [
        UnsupportedJobs(m, v, infos[v].label, call_mode_of(infos[v].dimensions), n, reason)
        for (m, v, reason), n in sorted(counts.items(), key=lambda kv: (kv[0][0], rank.get(kv[0][1], 1 << 30),
                                                                         kv[0][2]))
    ]


def _key(dims: Mapping[str, Any], drop: Sequence[str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, str(v)) for k, v in dims.items() if k not in drop and k != "call_mode"))


def format_tax(md: ModelData, infos: Mapping[str, VariantInfo], settings: Settings) -> list[FormatTax]:
    """Per call mode other than prompt: accuracy(mode) - accuracy(prompt) on the same cases (module docstring)."""
    num, den = md.num["accuracy"], md.den["accuracy"]
    with np.errstate(invalid="ignore", divide="ignore"):
        score = np.where(den > 0, num / np.where(den > 0, den, 1), 0.0)
    modes = {vid: call_mode_of(infos[vid].dimensions) for vid in md.vids}
    prompt_cols = [c for c, vid in enumerate(md.vids) if modes[vid] == PROMPT]
    rows: list[tuple[Any, ...]] = []
    for mode in (m for m in CALL_MODES if m != PROMPT):
        drop = FORMAT_DIMENSIONS if mode == "native" else ()
        diff_sum = np.zeros(len(md.cases))
        mode_sum, ref_sum, count = np.zeros(len(md.cases)), np.zeros(len(md.cases)), np.zeros(len(md.cases))
        pairs = 0
        for col, vid in enumerate(md.vids):
            if modes[vid] != mode:
                continue
            key = _key(infos[vid].dimensions, drop)
            refs = [c for c in prompt_cols if _key(infos[md.vids[c]].dimensions, drop) == key]
            if not refs:
                continue
            pairs += 1
            shared = (den[:, col] > 0) & (den[:, refs] > 0).all(axis=1)
            ref = score[:, refs].mean(axis=1)
            mode_sum += np.where(shared, score[:, col], 0.0)
            ref_sum += np.where(shared, ref, 0.0)
            diff_sum += np.where(shared, score[:, col] - ref, 0.0)
            count += shared
        if not pairs:
            continue
        n_cases = int(np.count_nonzero(count))
        total = float(count.sum())
        if total:
            acc, ref_acc = float(mode_sum.sum() / total), float(ref_sum.sum() / total)
            diff_ci = ci_of(md.resampler.ratio(diff_sum, count), settings.confidence)
        else:
            acc = ref_acc = math.nan
            diff_ci = (math.nan, math.nan)
        better, worse = int(np.sum(diff_sum > 1e-12)), int(np.sum(diff_sum < -1e-12))
        p = stats.mcnemar_exact(better, worse, mid_p=settings.mid_p) if n_cases else math.nan
        reference = "prompt, mean over formats" if mode == "native" else "prompt, same format"
        rows.append((mode, reference, pairs, n_cases, acc, ref_acc, diff_ci, better, worse, p))
    adjusted = stats.holm([r[-1] for r in rows])
    return [
        FormatTax(model=md.model, call_mode=mode, reference=reference, n_pairs=pairs, n_cases=n_cases,
                  accuracy=acc, prompt_accuracy=ref_acc, diff=acc - ref_acc, diff_ci=diff_ci, better=better,
                  worse=worse, p_value=p, p_holm=ph, significant=bool(ph < settings.alpha))
        for (mode, reference, pairs, n_cases, acc, ref_acc, diff_ci, better, worse, p), ph in zip(
            rows, adjusted, strict=True
        )
    ]


def _format_of(dims: Mapping[str, Any], mode: str) -> str:
    """The return format a parse-share row is about; native answers have none (``-``)."""
    if mode == "native":
        return "-"
    value = dims.get("return_format", DIMENSIONS["return_format"].default)
    return str(getattr(value, "value", value))


def parse_shares(jobs: Sequence[ResultRow], infos: Mapping[str, VariantInfo], confidence: float) -> list[ParseShare]:
    """Per model, call mode and return format: the share of scored answers that parse as calls, and the accuracy."""
    counts: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for j in jobs:
        if not j.scored or j.variant_id not in infos:
            continue
        dims = infos[j.variant_id].dimensions
        mode = call_mode_of(dims)
        c = counts[(j.model, mode, _format_of(dims, mode))]
        c[0] += 1
        c[1] += parses_as_call(j)
        c[2] += j.correct
    mode_rank = {m: i for i, m in enumerate(CALL_MODES)}
    fmt_values = [str(getattr(v, "value", v)) for v in DIMENSIONS["return_format"].values or ()]  # a closed set
    fmt_rank = {f: i for i, f in enumerate(["-", *fmt_values])}
    out = []
    for (model, mode, fmt), (n, parsed, correct) in sorted(
        counts.items(), key=lambda kv: (kv[0][0], mode_rank.get(kv[0][1], 99), fmt_rank.get(kv[0][2], 99), kv[0][2])
    ):
        out.append(ParseShare(model=model, call_mode=mode, return_format=fmt, n=n, parsed=parsed,
                              parse_share=parsed / n, parse_ci=stats.wilson_interval(parsed, n, confidence),
                              correct=correct, accuracy=correct / n,
                              accuracy_ci=stats.wilson_interval(correct, n, confidence)))
    return out


def mode_failures(jobs: Sequence[ResultRow], infos: Mapping[str, VariantInfo]) -> list[ModeFailure]:
    """Failure modes per model and call mode (counts and share of the mode's scored jobs)."""
    scored: Counter[tuple[str, str]] = Counter()
    failed: Counter[tuple[str, str, str]] = Counter()
    for j in jobs:
        if not j.scored or j.variant_id not in infos:
            continue
        mode = call_mode_of(infos[j.variant_id].dimensions)
        scored[(j.model, mode)] += 1
        if not j.correct:
            failed[(j.model, mode, failure_mode(j))] += 1
    mode_rank = {m: i for i, m in enumerate(CALL_MODES)}
    return [
        ModeFailure(model, mode, fm, n, n / scored[(model, mode)])
        for (model, mode, fm), n in sorted(
            failed.items(), key=lambda kv: (kv[0][0], mode_rank.get(kv[0][1], 99), -kv[1], kv[0][2])
        )
    ]
