"""The aggregated report: frozen records that every output format renders.

Aggregation (``_compute``) turns result rows into one ``ReportData``; Markdown,
CSV, LaTeX, HTML and the figures only format it, so every number is computed
once and every file agrees. Accuracies are fractions (0..1); differences
between accuracies are fractions too, rendered as percentage points.
``Interval`` is ``(low, high)`` of a 95 % interval unless ``Settings`` says
otherwise; NaN where it cannot be computed (e.g. no data).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

__all__ = [
    "TAU_BENCH_DEFINITION",
    "TAU_BENCH_PASS_K",
    "TICKET_BENCH_DEFINITION",
    "TICKET_BENCH_PASS_K",
    "CategoryCell",
    "Cell",
    "CostSummary",
    "DimensionEffect",
    "EndpointSummary",
    "FailureCount",
    "FailureExample",
    "FigureRef",
    "FormatTax",
    "Interval",
    "LanguageCell",
    "LanguageMatch",
    "LanguageSummary",
    "ModeFailure",
    "PairedTest",
    "ParseShare",
    "PassK",
    "PendingJobs",
    "ReportData",
    "Sensitivity",
    "Settings",
    "SpeedPoint",
    "TranslationDelta",
    "UnsupportedJobs",
    "VariantInfo",
]

Interval = tuple[float, float]
NAN_INTERVAL: Interval = (math.nan, math.nan)


@dataclass(frozen=True)
class Settings:
    """How intervals and tests were computed (printed in every report's methods section)."""

    n_resamples: int
    seed: int
    confidence: float
    alpha: float
    mid_p: bool = False


@dataclass(frozen=True)
class VariantInfo:
    """A variant as the rows describe it (id, BFCL-notation label, dimension values)."""

    id: str
    label: str
    dimensions: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Cell:
    """One model x variant: AST accuracy and the secondary rates, each with an interval.

    ``n`` counts scored jobs (failed calls included, as incorrect); ``unscored``
    jobs (no verdict, no error) are left out of every rate. ``ci_method`` is
    ``wilson`` when every case was asked once, else ``bootstrap`` (over cases).
    Secondary rates are NaN when no job carries the field.
    """

    model: str
    variant_id: str
    label: str
    n: int
    correct: int
    accuracy: float
    ci: Interval
    ci_method: str
    errors: int
    unscored: int
    n_cases: int
    repeats: int
    fsa: float
    fsa_ci: Interval
    format_match: float
    format_match_ci: Interval
    format_agnostic_accuracy: float
    format_agnostic_ci: Interval
    tool_f1: float
    arg_f1: float


@dataclass(frozen=True)
class Sensitivity:
    """How much one model's accuracy moves across variants.

    ``spread`` = best - worst variant accuracy; its bootstrap replicates
    re-pick best and worst in each resample. The plug-in max - min is biased
    upwards (noise alone spreads variants apart); ``spread_bias`` is the
    bootstrap estimate of that bias, never negative: the mean over resamples
    of max - min minus the estimate's best - worst in that resample.
    ``std`` is the sample std across variants (bfcl-eval's accuracy_std).
    ``instance_sensitivity`` is ProSA's: per case, the mean |difference| of its
    correctness between pairs of variants, averaged over cases.
    """

    model: str
    n_variants: int
    n_cases: int
    mean_accuracy: float
    mean_ci: Interval
    best_variant: str
    best_label: str
    best_accuracy: float
    best_ci: Interval
    worst_variant: str
    worst_label: str
    worst_accuracy: float
    worst_ci: Interval
    spread: float
    spread_ci: Interval
    spread_bias: float
    std: float
    std_ci: Interval
    instance_sensitivity: float
    instance_ci: Interval


@dataclass(frozen=True)
class DimensionEffect:
    """Marginal accuracy of one value of one dimension, for one model.

    ``marginal``: mean accuracy over the variants taking this value among the
    variants where the dimension varies (those with a partner differing only
    in this dimension). ``diff``: mean over matched pairs (same other
    dimensions) of accuracy(value) - accuracy(reference); 0 for the reference.
    """

    model: str
    dimension: str
    value: str
    reference: str
    n_variants: int
    marginal: float
    marginal_ci: Interval
    n_pairs: int
    diff: float
    diff_ci: Interval


@dataclass(frozen=True)
class PairedTest:
    """A variant against the baseline variant on the cases both were run on.

    ``better`` / ``worse``: cases where the variant's correctness is higher /
    lower than the baseline's (the discordant pairs of McNemar's test; with
    repeats, per-case mean correctness is compared: a sign test).
    """

    model: str
    variant_id: str
    label: str
    baseline_id: str
    n_cases: int
    accuracy: float
    baseline_accuracy: float
    diff: float
    diff_ci: Interval
    better: int
    worse: int
    p_value: float
    p_holm: float
    significant: bool


@dataclass(frozen=True)
class LanguageCell:
    """Accuracy of one model x variant on the cases of one language."""

    model: str
    variant_id: str
    label: str
    language: str
    n: int
    correct: int
    accuracy: float
    ci: Interval


@dataclass(frozen=True)
class CategoryCell:
    """Accuracy of one model on the cases of one dataset category (``Case.category``: simple, multiple,
    parallel, parallel_multiple, irrelevance, or a ``jsonl:`` file's own), over all its variants
    (``variant_id`` empty, ``label`` ``all variants``) or of one variant.

    ``n``: scored jobs; ``n_cases``: the category's cases among them. ``ci_method`` as in ``Cell``:
    ``wilson`` when every case was asked once (one job per case), else ``bootstrap`` over the category's
    cases (a rate of exactly 0 or 1 then gets Wilson over cases, where the bootstrap collapses to a point).
    The all-variants cell has one job per case only with one variant and no repeats.
    """

    model: str
    category: str
    variant_id: str
    label: str
    n: int
    correct: int
    n_cases: int
    accuracy: float
    ci: Interval
    ci_method: str


@dataclass(frozen=True)
class PendingJobs:
    """Jobs that the last invocation of a run planned and that have no result yet (from its ``run.json``).

    Only a run directory knows them: rows alone (an export) cannot tell a
    planned job that was never answered from one that was never planned.
    """

    planned: int
    """Jobs in the last invocation's plan (models x variants x cases x repeats)."""
    pending: int | None
    """Of those, the ones with no result; None when that invocation did not finish (killed, or still running)."""
    started: str
    """When the last invocation started (ISO 8601, UTC)."""
    stopped: str | None = None
    """Why it stopped early: ``interrupted``, ``max_cost``, ``halted`` (a model stopped by an error), or None."""
    then: str = "re-run the same command to finish"
    """What finishes them: the same command, collecting provider batches, or importing a batch file."""

    @classmethod
    def from_run_record(cls, record: Mapping[str, Any], pending: int | None = None) -> PendingJobs | None:
        """The pending jobs of a ``run.json``'s last invocation; None when there are none (or it is a version-1
        record, which did not count them, of an invocation that finished).

        ``pending``: that invocation's jobs without a result counted now in the store
        (``session.plan_status``), which answers stored since (``import-batch``, a provider batch collected
        by ``status``) lower; without it, the count the record holds.
        """
        invocations = record.get("invocations") or []
        last = invocations[-1] if invocations and isinstance(invocations[-1], Mapping) else {}
        planned = last.get("jobs")
        if not isinstance(planned, int):
            return None
        started = str(last.get("started") or "?")
        if last.get("finished") is None:
            return cls(planned, None, started)
        if pending is None:
            pending = last.get("pending")
        if not isinstance(pending, int) or pending <= 0:
            return None
        summary = last.get("summary") or {}
        stopped = summary.get("stopped") or ("halted" if summary.get("halted") else None)
        then = "re-run the same command to finish"
        if isinstance(last.get("export_batch"), Mapping):
            then = ("answer the exported requests and store them with promptgrid import-batch RUN_DIR RESULTS.jsonl "
                    "(or export them again)")
        elif summary.get("batches_live") or summary.get("batches"):
            then = "collect the provider batches with promptgrid status RUN_DIR (or re-run the same command)"
        return cls(planned, pending, started, stopped, then)

    def note(self) -> str:
        """The report's sentence about them."""
        if self.pending is None:
            return (f"The last run (started {self.started}, {self.planned} jobs planned) has not finished: it is "
                    "still running or was killed, so some of its jobs may be pending; re-run the same command to "
                    "finish.")
        why = {"interrupted": " (interrupted)", "max_cost": " (stopped at --max-cost)",
               "halted": " (a model was stopped by an error every call would repeat)"}.get(self.stopped or "", "")
        return (f"{self.pending} of {self.planned} jobs pending{why}: planned by the last run (started "
                f"{self.started}) but without a result, so left out of every table; {self.then}.")


@dataclass(frozen=True)
class LanguageMatch:
    """ITC language match of one model on one language's cases, over its free-text answers.

    Only answers that hold no function call are measured (``ResultRow.language_match``):
    ``n`` counts those, ``answers`` every scored answer (failed calls aside) for context.
    """

    model: str
    language: str
    answers: int
    n: int
    matched: int
    rate: float
    ci: Interval


@dataclass(frozen=True)
class LanguageSummary:
    """MASSIVE-Agents Table 2 (macro average, best, worst) and Ticket-Bench gap and std."""

    model: str
    variant_id: str
    label: str
    n_languages: int
    macro: float
    macro_ci: Interval
    best_language: str
    best_accuracy: float
    worst_language: str
    worst_accuracy: float
    gap: float
    gap_ci: Interval
    std: float
    std_ci: Interval


@dataclass(frozen=True)
class TranslationDelta:
    """MASSIVE-Agents Fig. 4: a translated prompt against the English-only prompt.

    ``translation``: ``partial`` (descriptions translated), ``full``
    (instructions and descriptions) or ``instructions`` (instructions only).
    ``prompt_language``: the language the prompt was translated into
    (``query`` = the test case's own language). ``delta`` = accuracy -
    english_accuracy on the same cases (a fraction; x100 for percentage
    points); ``relative`` = delta / english_accuracy (NaN when that is 0).
    """

    model: str
    variant_id: str
    label: str
    english_variant_id: str
    translation: str
    prompt_language: str
    test_language: str
    n_cases: int
    accuracy: float
    english_accuracy: float
    delta: float
    delta_ci: Interval
    relative: float


TAU_BENCH_PASS_K = "pass^k (tau-bench, C(c,k)/C(n,k))"
"""The name of tau-bench's pass^k: mean over entries of C(c, k) / C(n, k)."""
TICKET_BENCH_PASS_K = "pass^k (Ticket-Bench, (c/n)^k)"
"""The name of Ticket-Bench's pass^k: mean over entries of (c / n) ** k."""
TAU_BENCH_DEFINITION = "C(c,k)/C(n,k)"
"""tau-bench's per-entry pass^k (``metrics.pass_hat_k_case(..., unbiased=True)``)."""
TICKET_BENCH_DEFINITION = "(c/n)^k"
"""Ticket-Bench's per-entry pass^k (``metrics.pass_hat_k_case``)."""


@dataclass(frozen=True)
class PassK:
    """pass^k of one model x variant on one language (or ``overall``), under one named definition.

    ``value`` is the mean over the ``n_cases`` entries (cases with a scored repeat, or a conversation report's
    (variant, conversation) pairs) of the per-entry value ``definition`` gives from the entry's ``c`` valid of
    ``n`` repeats; ``ci`` its bootstrap interval. ``name`` says which pass^k it is: ``TICKET_BENCH_PASS_K``
    ((c/n)^k, the single-turn report's only one) or ``TAU_BENCH_PASS_K`` (C(c,k)/C(n,k); a conversation report
    carries both). ``variant_id`` is empty (``label`` ``all variants``) for a model over all its variants.

    The single-turn report writes a ``PassK`` as ``row()``, a conversation report, under a record that already
    names the model, variant and language, as ``named()``.
    """

    model: str
    variant_id: str
    label: str
    language: str
    k: int
    value: float
    ci: Interval
    n_cases: int
    name: str = TICKET_BENCH_PASS_K
    definition: str = TICKET_BENCH_DEFINITION

    @property
    def entries(self) -> int:
        """``n_cases``, by the conversation reports' word for it."""
        return self.n_cases

    def row(self) -> dict[str, Any]:
        """The single-turn report's ``pass_k`` entry: model, variant_id, label, language, k, value, ci, n_cases
        (JSON-ready; every one of them is Ticket-Bench's)."""
        return {"model": self.model, "variant_id": self.variant_id, "label": self.label, "language": self.language,
                "k": self.k, "value": _jsonable(self.value), "ci": _jsonable(self.ci), "n_cases": self.n_cases}

    def named(self) -> dict[str, Any]:
        """The conversation reports' ``PASSK``: name, definition, k, entries (``n_cases``), value, ci
        (JSON-ready)."""
        return {"name": self.name, "definition": self.definition, "k": self.k, "entries": self.n_cases,
                "value": _jsonable(self.value), "ci": _jsonable(self.ci)}


@dataclass(frozen=True)
class FailureCount:
    model: str
    variant_id: str
    label: str
    mode: str
    count: int
    share: float  # of the cell's scored jobs


@dataclass(frozen=True)
class FailureExample:
    """One response of a failure mode, truncated; raw text (escape it when rendering)."""

    mode: str
    model: str
    variant_id: str
    label: str
    case_id: str
    repeat: int
    text: str


@dataclass(frozen=True)
class UnsupportedJobs:
    """Jobs of one model and variant never sent: the model cannot do the variant's call mode (in no rate)."""

    model: str
    variant_id: str
    label: str
    call_mode: str
    count: int
    reason: str
    """The stored reason (the row's ``error``)."""


@dataclass(frozen=True)
class FormatTax:
    """accuracy(call mode) - accuracy(prompt) of one model, paired on the same cases (``_call_modes``)."""

    model: str
    call_mode: str
    reference: str
    """What the mode is compared with: the prompt variant of the same format, or the mean over prompt formats."""
    n_pairs: int
    """Variants of this mode that have a prompt-mode partner."""
    n_cases: int
    accuracy: float
    prompt_accuracy: float
    diff: float
    diff_ci: Interval
    better: int
    """Cases where the mode scores higher than its prompt reference."""
    worse: int
    p_value: float
    p_holm: float
    significant: bool


@dataclass(frozen=True)
class ParseShare:
    """Per model, call mode and return format: answers that parse as calls, and the accuracy (Wilson intervals)."""

    model: str
    call_mode: str
    return_format: str
    """``-`` for native answers (no return format applies)."""
    n: int
    parsed: int
    parse_share: float
    parse_ci: Interval
    correct: int
    accuracy: float
    accuracy_ci: Interval


@dataclass(frozen=True)
class ModeFailure:
    """One failure mode of one model under one call mode."""

    model: str
    call_mode: str
    mode: str
    count: int
    share: float  # of the call mode's scored jobs


@dataclass(frozen=True)
class CostSummary:
    """Tokens, money and time of one model; None where the rows carry no value.

    Counted per model *call*: rows that share a call (identical prompts under
    several variants, same ``key``) count once, as the store bills them.
    """

    model: str
    calls: int
    errors: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    latency_p50: float
    latency_p95: float
    output_tokens_per_s: float


@dataclass(frozen=True)
class EndpointSummary:
    """One endpoint of a model served by several (``api_base`` a list): the calls it took, per model call."""

    model: str
    endpoint: str
    """The ``api_base`` (credentials removed); ``"(unknown)"`` for calls stored without one."""
    calls: int
    errors: int
    """Calls that ended in an error on this endpoint (after failover, and the runner's retries)."""
    latency_mean: float
    """Mean seconds of its answered calls (NaN when none)."""


@dataclass(frozen=True)
class SpeedPoint:
    """MASSIVE-Agents Fig. 2: mean accuracy over variants against output speed."""

    model: str
    template: str
    accuracy: float
    ci: Interval
    output_tokens_per_s: float


@dataclass(frozen=True)
class FigureRef:
    """A figure written next to a report: file path relative to the report, title and caption."""

    name: str
    title: str
    caption: str
    path: str


@dataclass(frozen=True)
class ReportData:
    """Everything a report shows, computed once."""

    settings: Settings
    models: tuple[str, ...]
    variants: tuple[VariantInfo, ...]
    baseline: str | None
    cells: tuple[Cell, ...]
    sensitivity: tuple[Sensitivity, ...]
    effects: tuple[DimensionEffect, ...]
    baseline_tests: tuple[PairedTest, ...]
    languages: tuple[str, ...]
    language_cells: tuple[LanguageCell, ...]
    language_summaries: tuple[LanguageSummary, ...]
    translation: tuple[TranslationDelta, ...]
    language_match: tuple[LanguageMatch, ...]
    pass_k: tuple[PassK, ...]
    failure_counts: tuple[FailureCount, ...]
    failure_examples: tuple[FailureExample, ...]
    costs: tuple[CostSummary, ...]
    speed: tuple[SpeedPoint, ...]
    n_rows: int
    n_cases: int
    max_repeats: int
    notes: tuple[str, ...] = ()
    pending: PendingJobs | None = None
    """The last invocation's unanswered jobs, when the rows came from a run directory that has some."""
    unsupported: tuple[UnsupportedJobs, ...] = ()
    """Jobs never sent (the model cannot do the call mode); in no rate."""
    format_tax: tuple[FormatTax, ...] = ()
    """Per model, each call mode against prompt mode; empty when the run has one call mode."""
    parse_shares: tuple[ParseShare, ...] = ()
    """Per model, call mode and return format; empty when the run has only prompt-mode variants."""
    mode_failures: tuple[ModeFailure, ...] = ()
    """Failure modes per call mode; empty when the run has one call mode."""
    endpoints: tuple[EndpointSummary, ...] = ()
    """Per model and endpoint, for the models whose calls went to more than one endpoint; else empty."""
    categories: tuple[str, ...] = ()
    """The dataset categories of the scored cases, in ``CATEGORIES`` order; empty when there is only one."""
    category_cells: tuple[CategoryCell, ...] = ()
    """Per model x category (all variants) and model x variant x category; empty with one category."""
    adaptive: tuple[dict[str, Any], ...] = ()
    """What an adaptive run found, per model (``AdaptiveResult.to_dict()``, docs/adaptive.md); empty otherwise."""

    def shape(self) -> str:
        """``2 models x 26 variants x 46 cases, 2,392 jobs``: what the report covers, in words."""
        def n(count: int, word: str) -> str:
            return f"{count:,} {word}{'' if count == 1 else 's'}"

        return (f"{n(len(self.models), 'model')} x {n(len(self.variants), 'variant')} x {n(self.n_cases, 'case')}, "
                f"{n(self.n_rows, 'job')}")

    def __repr__(self) -> str:
        """One line (the tables are in the fields; ``to_dict`` gives them all)."""
        more = f" and {len(self.models) - 3} more" if len(self.models) > 3 else ""
        return f"ReportData({self.shape()}; models {list(self.models[:3])!r}{more})"

    def cell(self, model: str, variant_id: str) -> Cell | None:
        for c in self.cells:
            if c.model == model and c.variant_id == variant_id:
                return c
        return None

    def variant(self, variant_id: str) -> VariantInfo:
        for v in self.variants:
            if v.id == variant_id:
                return v
        raise KeyError(variant_id)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (NaN becomes None; each pass^k as ``PassK.row()``)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = [p.row() for p in value] if f.name == "pass_k" else _jsonable(value)
        adaptive = {r.get("model") for r in self.adaptive}
        for s in out["sensitivity"]:  # an adaptive model's headline is under "adaptive"; say why these differ
            if s["model"] in adaptive:
                s["basis"] = ("each variant's own measured cells (an adaptive run: the variants ran different case "
                              "sets); the best, worst and spread to compare variants by are this model's entry under "
                              "'adaptive'")
        return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if hasattr(value, "__dataclass_fields__"):
        return {k: _jsonable(v) for k, v in asdict(value).items()}
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value
