"""Reports for multi-turn conversation runs: accuracy, pass^k, paired comparisons, turns, failure modes.

``conversation_report(episodes, variants)`` reads ``Result`` records
(``ConversationRun.episodes``) and the grid's variants (variant id -> its
dimension values as strings) and returns a ``ConversationReport``: frozen
dataclasses with ``to_dict()`` (plain JSON data), ``to_markdown()`` and
``console()``.

Words used throughout:

- *episode*: one (model, variant, conversation, repeat).
- *finished* episode: ``valid`` is ``True`` or ``False``; an episode a
  step's call ended for good (``status`` ``error``) is a failed one, as a
  failed single-turn call is (failure mode ``call_error``). An *unfinished*
  episode (``valid is None``: the run stopped before it ended, and a later run
  resumes it; or its model cannot be sent its request, ``unsupported``) is
  counted as unfinished and otherwise left out: it is never scored as a
  failure, it is in no rate, no pass^k, no comparison. Its cost and latency
  are still in the sums (that money and time were spent).
- *entry*: a (model, variant, conversation) with at least one finished
  episode; ``n`` is its number of finished repeats, ``c`` how many of them are
  valid, ``c / n`` its *pass rate*.
- ``k``: by default the largest number of finished repeats that every entry
  has (at least 1); a larger ``k`` is refused (``ValueError`` naming an entry
  that has fewer).

Statistics (helpers of ``promptgrid.matrix.report.stats``; the bootstrap is the single-turn report's
``Resampler``):

- accuracy: valid / finished episodes, with a Wilson interval over episodes.
- pass^k, two definitions, always both, always named:
  ``pass^k (tau-bench, C(c,k)/C(n,k))``, the mean over entries of
  ``C(c, k) / C(n, k)`` (tau-bench's unbiased estimate of the chance that k
  fresh runs all succeed), and ``pass^k (Ticket-Bench, (c/n)^k)``, the mean
  over entries of ``(c / n) ** k`` (``metrics.pass_hat_k_case``). With
  ``n == k`` they agree only when every entry has c in {0, n}.
- intervals of means over entries (pass^k, paired differences, the native
  gap): percentile bootstrap over the model's *conversations*, with one set of
  weights per model (``_matrix.Resampler``, seeded by
  ``stats.seed_for(model, base=seed)``): every variant of a model is
  resampled on the same conversations, which keeps the pairing, and adding a
  model leaves the others' intervals unchanged. A per-model pass^k (entries
  are the model's (variant, conversation) pairs) resamples conversations as
  clusters of entries, since the entries of one conversation are correlated.
- paired comparisons: per model, each variant against the model's first
  variant (in the order of ``variants``), and every pair when the model has at
  most ``MAX_ALL_PAIRS`` variants; on the entries both variants have:
  difference of the mean pass rate (other - reference) with its paired
  bootstrap interval, and an exact McNemar test on per-entry *majority-valid*
  outcomes (``2 c > n``; a tie is not a majority), ``b`` = entries only the
  reference has majority-valid, ``c`` = only the other; Holm-adjusted over the
  model's pairs.
- accuracy by turn position: per variant, at turn index t, valid turns /
  finished episodes that have a turn t, with a Wilson interval.
- first divergence: per compared pair (the pairs of the comparisons) and per
  (conversation, repeat) that both variants finished, the first turn index
  whose validity differs (turns compared where both episodes have them);
  "never" when none does. Counts by turn index and the median over the
  pairs that diverge.
- failure modes: per variant, the ``failure_mode`` of failed episodes (the
  first failed turn's ``TurnFailureMode``; ``"unknown"`` when unset).
- native-vs-prompt gap: per model, for each native variant and prompt variant
  whose other dimension values agree (a key either of them lacks is a
  wildcard: a native variant has no return format), the difference of mean
  pass rate (native - prompt) on the entries both have, with a paired
  bootstrap interval; and overall, on the conversations every native and
  every prompt variant of the model has, the mean over native variants minus
  the mean over prompt variants of the per-entry pass rate. ``call_mode`` is
  ``"prompt"`` where a variant's dimensions lack it. Not available when the
  model lacks a native or a prompt variant (overall) or a matching pair (pairs).

``to_dict()`` schema (every share, rate and difference a fraction: 0.425, not
42.5; the Markdown prints percentages and percentage points; a number that
cannot be computed is ``null``; every ``ci`` is ``[low, high]``)::

    {
      "k": int, "confidence": float, "n_resamples": int, "seed": int,
      "pass_k_names": {"tau_bench": "pass^k (tau-bench, C(c,k)/C(n,k))",
                       "ticket_bench": "pass^k (Ticket-Bench, (c/n)^k)"},
      "episodes": int, "finished": int, "unfinished": int, "unfinished_note": str,
      "variants": [{"model", "variant_id", "call_mode", "entries", "episodes", "unfinished", "valid",
                    "accuracy", "accuracy_ci",
                    "pass_k_tau": PASSK, "pass_k_ticket": PASSK,
                    "mean_steps", "cost_usd", "cost_unknown", "latency_s"}],
      "models": [{"model", "variants", "entries", "episodes", "unfinished", "valid", "accuracy", "accuracy_ci",
                  "pass_k_tau": PASSK, "pass_k_ticket": PASSK, "cost_usd", "latency_s"}],
      "comparisons": [{"model", "reference", "other", "against_baseline", "entries",
                       "reference_rate", "other_rate", "diff", "diff_ci",
                       "b", "c", "p_value", "p_holm"}],
      "turn_accuracy": [{"model", "variant_id",
                         "positions": [{"turn", "n", "valid", "accuracy", "ci"}]}],
      "divergence": [{"model", "reference", "other", "compared",
                      "by_turn": [{"turn", "count"}], "never", "median_turn"}],
      "failure_modes": [{"model", "variant_id", "failed",
                         "modes": [{"mode", "count", "share", "description"}]}],
      "native_gap": [{"model", "available", "note",
                      "pairs": [{"native", "prompt", "entries", "native_rate", "prompt_rate", "diff", "diff_ci"}],
                      "overall": null | {"natives", "prompts", "entries", "native_rate", "prompt_rate",
                                         "diff", "diff_ci"}}]
    }

    PASSK = {"name", "definition", "k", "entries", "value", "ci"}   (PassK.named())
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Any

import numpy as np

from promptgrid.display import escape_controls
from promptgrid.matrix.report import stats
from promptgrid.matrix.report._format import DASH, fmt_num, pct, pval, with_ci
from promptgrid.matrix.report._matrix import Resampler, ci_of
from promptgrid.matrix.report._model import (
    TAU_BENCH_DEFINITION,
    TAU_BENCH_PASS_K,
    TICKET_BENCH_DEFINITION,
    TICKET_BENCH_PASS_K,
    PassK,
    _jsonable,
)
from promptgrid.matrix.report._tables import Table, markdown_table
from promptgrid.matrix.running.results import Result
from promptgrid.matrix.scoring.state_check import TurnFailureMode

__all__ = [
    "MAX_ALL_PAIRS",
    "TAU_BENCH_PASS_K",
    "TICKET_BENCH_PASS_K",
    "ConversationReport",
    "Divergence",
    "EpisodeFailureModes",
    "FailureModeCount",
    "ModelConversationSummary",
    "NativeGap",
    "NativeGapOverall",
    "NativeGapPair",
    "PassHatK",
    "ReportSection",
    "TurnAccuracy",
    "TurnPosition",
    "VariantComparison",
    "VariantConversationSummary",
    "conversation_report",
    "sections_markdown",
]

PassHatK = PassK
"""An alias of ``promptgrid.matrix.report.PassK``, the one pass^k record, which single-turn and conversation
reports share (this module's own record had the name before; ``entries`` reads on, a property, but construct a
``PassK``: its fields are ``PassK``'s). ``TAU_BENCH_PASS_K`` and ``TICKET_BENCH_PASS_K`` are defined with it and
re-exported here."""
MAX_ALL_PAIRS = 8
"""Up to this many variants of a model, every pair is compared; beyond, each variant against the first only."""

PROMPT = "prompt"
NATIVE = "native"
UNKNOWN_MODE = "unknown"
CALL_ERROR = "call_error"
"""The failure mode of an episode a step's call ended for good (``status`` ``error``), as the single-turn report
names a failed call's."""
UNFINISHED_NOTE = ("Unfinished episodes (valid is None: the episode could not be completed; a later run resumes it) "
                   "are counted here and left out of every rate: they are not scored as failures.")

Interval = tuple[float, float]


def _safe(text: str) -> str:
    return escape_controls(str(text))


def _grid(headers: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool]) -> Table:
    """A section's table (its key, title and note are the section's: ``_section`` sets them)."""
    return Table("", "", tuple(str(h) for h in headers), tuple(tuple(str(c) for c in row) for row in rows),
                 tuple(numeric))


@dataclass(frozen=True)
class ReportSection:
    """One part of a conversation (or language) report, as each writer shows it: ``to_markdown`` and the HTML page.

    ``key``: a stable id (the page's anchor); ``table``: ``None`` when there is nothing to tabulate, ``empty`` is
    then the sentence shown in its place (``""``: nothing). ``note`` says what the table shows and stands under it;
    ``glossary``: (code, meaning) pairs listed after the note (the failure modes').
    """

    key: str
    title: str
    table: Table | None
    empty: str = ""
    note: str = ""
    glossary: tuple[tuple[str, str], ...] = ()


def _section(key: str, title: str, table: Table | None, *, empty: str = "", note: str = "",
             glossary: tuple[tuple[str, str], ...] = ()) -> ReportSection:
    """A section whose table carries the section's key, title and note (the HTML table shows them)."""
    if table is not None:
        table = Table(key, title, table.headers, table.rows, table.numeric, note)
    return ReportSection(key, title, table, empty, note, glossary)


def sections_markdown(sections: Sequence[ReportSection]) -> list[str]:
    """The lines of ``sections`` in Markdown: a ``###`` title, the GitHub table (or the sentence said in its
    place), the note in italics, the glossary as a list; a blank line after each."""
    out: list[str] = []
    for s in sections:
        out += [f"### {s.title}", ""]
        if s.table is not None:
            out += [markdown_table(s.table), ""]
        elif s.empty:
            out += [s.empty, ""]
        if s.note:
            out += [f"_{s.note}_", ""]
        if s.glossary:
            out += [f"- `{code}`: {meaning}" for code, meaning in s.glossary] + [""]
    return out


def _fraction_ci(x: float, ci: Interval) -> str:
    """A fraction with two decimals and its interval: ``0.42 [0.35, 0.50]`` (as the report's pass^k table)."""
    if math.isnan(x):
        return DASH
    if math.isnan(ci[0]) or math.isnan(ci[1]):
        return f"{x:.2f}"
    return f"{x:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]"


# ----------------------------------------------------------------------------------------------- records


def _summary_dict(record: Any) -> dict[str, Any]:
    """A summary record (one with ``pass_k_tau`` and ``pass_k_ticket``) as JSON data: ``_jsonable`` fields, each
    pass^k as ``PassK.named()`` (the record already names its model, variant and language)."""
    out: dict[str, Any] = {}
    for f in fields(record):
        value = getattr(record, f.name)
        out[f.name] = value.named() if isinstance(value, PassK) else _jsonable(value)
    return out


@dataclass(frozen=True)
class VariantConversationSummary:
    """One (model, variant): how many entries and episodes, accuracy, both pass^k, steps, cost and latency.

    ``episodes`` counts finished episodes, ``unfinished`` the others; ``valid`` the valid ones.
    ``accuracy`` = valid / episodes with its Wilson interval. ``mean_steps``: model calls per finished
    episode. ``cost_usd``: the sum of the known costs of all episodes (unfinished included), ``None`` when
    none is known; ``cost_unknown`` how many episodes have no cost. ``latency_s``: the sum over all episodes.
    """

    model: str
    variant_id: str
    call_mode: str
    entries: int
    episodes: int
    unfinished: int
    valid: int
    accuracy: float
    accuracy_ci: Interval
    pass_k_tau: PassK
    pass_k_ticket: PassK
    mean_steps: float
    cost_usd: float | None
    cost_unknown: int
    latency_s: float

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data, both pass^k as ``PassK.named()`` (``PASSK`` in the module docstring)."""
        return _summary_dict(self)


@dataclass(frozen=True)
class ModelConversationSummary:
    """One model over all its variants: entries are its (variant, conversation) pairs.

    ``accuracy`` = valid / finished episodes (Wilson interval); the pass^k are means over those entries,
    their intervals resample conversations (each with all its variants' entries).
    """

    model: str
    variants: int
    entries: int
    episodes: int
    unfinished: int
    valid: int
    accuracy: float
    accuracy_ci: Interval
    pass_k_tau: PassK
    pass_k_ticket: PassK
    cost_usd: float | None
    latency_s: float

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data, both pass^k as ``PassK.named()`` (``PASSK`` in the module docstring)."""
        return _summary_dict(self)


@dataclass(frozen=True)
class VariantComparison:
    """``other`` against ``reference`` (same model) on the ``entries`` (conversations) both have.

    ``reference_rate`` / ``other_rate``: mean per-entry pass rate (c / n) on those entries; ``diff`` =
    other - reference with its paired bootstrap interval. ``b``: entries where only the reference is
    majority-valid (2c > n), ``c``: only the other; ``p_value``: exact McNemar on b and c; ``p_holm``: Holm
    over the model's comparisons. ``against_baseline``: the reference is the model's first variant.
    """

    model: str
    reference: str
    other: str
    against_baseline: bool
    entries: int
    reference_rate: float
    other_rate: float
    diff: float
    diff_ci: Interval
    b: int
    c: int
    p_value: float
    p_holm: float


@dataclass(frozen=True)
class TurnPosition:
    """At turn index ``turn``: ``valid`` of the ``n`` finished episodes that have that turn; Wilson ``ci``."""

    turn: int
    n: int
    valid: int
    accuracy: float
    ci: Interval


@dataclass(frozen=True)
class TurnAccuracy:
    """One (model, variant)'s accuracy by turn position, turn 0 first."""

    model: str
    variant_id: str
    positions: tuple[TurnPosition, ...]


@dataclass(frozen=True)
class Divergence:
    """Where two variants of a model first differ, over the ``compared`` (conversation, repeat) both finished.

    ``by_turn``: (turn index, how many first differ there), ascending; ``never``: how many agree on every
    turn both have; ``median_turn``: the median first-divergence turn over those that diverge (NaN if none).
    """

    model: str
    reference: str
    other: str
    compared: int
    by_turn: tuple[tuple[int, int], ...]
    never: int
    median_turn: float

    def to_dict(self) -> dict[str, Any]:
        """``_jsonable`` data, ``by_turn`` as ``[{"turn", "count"}]``."""
        out: dict[str, Any] = _jsonable(self)
        out["by_turn"] = [{"turn": t, "count": n} for t, n in self.by_turn]
        return out


@dataclass(frozen=True)
class FailureModeCount:
    """One failure mode: ``count`` of failed episodes, ``share`` of the variant's failed episodes."""

    mode: str
    count: int
    share: float
    description: str


@dataclass(frozen=True)
class EpisodeFailureModes:
    """One (model, variant)'s failed episodes by ``failure_mode`` (most frequent first)."""

    model: str
    variant_id: str
    failed: int
    modes: tuple[FailureModeCount, ...]


@dataclass(frozen=True)
class NativeGapPair:
    """A native variant against the prompt variant that differs from it only in ``call_mode``.

    On the ``entries`` (conversations) both have: mean pass rates and ``diff`` = native - prompt with its
    paired bootstrap interval.
    """

    native: str
    prompt: str
    entries: int
    native_rate: float
    prompt_rate: float
    diff: float
    diff_ci: Interval


@dataclass(frozen=True)
class NativeGapOverall:
    """Mean over the model's native variants minus mean over its prompt variants, per-entry pass rates.

    On the ``entries`` (conversations) that every one of those variants has; paired bootstrap interval.
    """

    natives: int
    prompts: int
    entries: int
    native_rate: float
    prompt_rate: float
    diff: float
    diff_ci: Interval


@dataclass(frozen=True)
class NativeGap:
    """One model's native-vs-prompt gap on multi-turn; ``available`` is False (and ``note`` says why) when the
    model has no native or no prompt variant, or no pair of them to compare."""

    model: str
    available: bool
    note: str
    pairs: tuple[NativeGapPair, ...]
    overall: NativeGapOverall | None


@dataclass(frozen=True)
class ConversationReport:
    """Everything ``conversation_report`` computes; the module docstring explains every number."""

    k: int
    confidence: float
    n_resamples: int
    seed: int
    episodes: int
    finished: int
    unfinished: int
    variants: tuple[VariantConversationSummary, ...]
    models: tuple[ModelConversationSummary, ...]
    comparisons: tuple[VariantComparison, ...]
    turn_accuracy: tuple[TurnAccuracy, ...]
    divergence: tuple[Divergence, ...]
    failure_modes: tuple[EpisodeFailureModes, ...]
    native_gap: tuple[NativeGap, ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    """Variant id -> the grid's label, used in place of the id in the tables and the console (ids stay in
    ``to_dict``)."""
    argument_rules: tuple[str, ...] = ()
    """The argument rules the finished episodes were scored under (``"bfcl"``, ``"strict"``; a verdict stored
    before the rule was recorded counts as ``"strict"``, the only rule then)."""
    argument_rule_disagreements: int = 0
    """Turns of finished episodes that the other argument rule scores otherwise (``argument_rule_disagrees``)."""

    def _name(self, variant_id: str) -> str:
        return self.labels.get(variant_id, variant_id)

    def _names(self, scored: Sequence[Any], accuracy: float) -> str:
        """The variants of ``scored`` at ``accuracy``: one name, or the tied ones (``a, b (tied)``)."""
        names = [self._name(v.variant_id) for v in scored if v.accuracy == accuracy]
        return names[0] if len(names) == 1 else ", ".join(names) + " (tied)"

    def _rules(self) -> str:
        """``arguments: bfcl (lenient)`` / ``strict``, and the turns the other rule scores otherwise."""
        names = ", ".join(_RULE_NAMES.get(rule, rule) for rule in self.argument_rules) or "none scored"
        return (f"arguments: {names}; {self.argument_rule_disagreements:,} turn(s) the other argument rule scores "
                "otherwise")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (schema in the module docstring)."""
        return {
            "k": self.k, "confidence": self.confidence, "n_resamples": self.n_resamples, "seed": self.seed,
            "pass_k_names": {"tau_bench": TAU_BENCH_PASS_K, "ticket_bench": TICKET_BENCH_PASS_K},
            "episodes": self.episodes, "finished": self.finished, "unfinished": self.unfinished,
            "unfinished_note": UNFINISHED_NOTE,
            "variants": [v.to_dict() for v in self.variants], "models": [m.to_dict() for m in self.models],
            "comparisons": _jsonable(self.comparisons), "turn_accuracy": _jsonable(self.turn_accuracy),
            "divergence": [d.to_dict() for d in self.divergence],
            "failure_modes": _jsonable(self.failure_modes), "native_gap": _jsonable(self.native_gap),
            "argument_rules": list(self.argument_rules),
            "argument_rule_disagreements": self.argument_rule_disagreements,
        }

    # ------------------------------------------------------------------------------------------- markdown

    def to_markdown(self) -> str:
        """The report as Markdown: one GitHub table per section, a line under each saying what it shows."""
        out = ["## Conversation runs", "", self.overview(), ""]
        return "\n".join(out + sections_markdown(self.sections()))

    def overview(self) -> str:
        """The line under the report's title: episodes, unfinished ones, k, the intervals, the argument rules."""
        return (f"{self.episodes:,} episodes: {self.finished:,} finished, {self.unfinished:,} unfinished. "
                f"{UNFINISHED_NOTE} k = {self.k}. Intervals: {100 * self.confidence:g}%. {_safe(self._rules())}.")

    def sections(self) -> tuple[ReportSection, ...]:
        """The report's sections, each a table (or the sentence said in its place) and the note under it: what
        ``to_markdown`` writes and the HTML page (``_html.conversation_html``) shows."""
        return (self._variants_section(), self._models_section(), self._comparisons_section(), self._turns_section(),
                self._divergence_section(), self._failures_section(), self._native_section())

    def _variants_section(self) -> ReportSection:
        """The section of accuracy and pass^k per variant."""
        k = self.k
        rows = [[v.model, self._name(v.variant_id), v.call_mode, fmt_num(v.entries), fmt_num(v.episodes),
                 fmt_num(v.unfinished), with_ci(v.accuracy, v.accuracy_ci),
                 _fraction_ci(v.pass_k_tau.value, v.pass_k_tau.ci),
                 _fraction_ci(v.pass_k_ticket.value, v.pass_k_ticket.ci), fmt_num(v.mean_steps, 1),
                 fmt_num(v.cost_usd, 4), fmt_num(v.latency_s, 1)] for v in self.variants]
        return _section(
            "conv-variants", "Accuracy and pass^k per variant",
            _grid(["model", "variant", "call mode", "entries", "episodes", "unfinished", "accuracy %",
                    TAU_BENCH_PASS_K, TICKET_BENCH_PASS_K, "steps/episode", "cost USD", "latency s"], rows,
                   [False, False, False] + [True] * 9),
            note=f"Accuracy: valid / finished episodes (Wilson interval). An entry is a conversation with a "
                 f"finished repeat; c of its n finished repeats are valid. {TAU_BENCH_PASS_K}: mean over entries of "
                 f"C(c,k)/C(n,k); {TICKET_BENCH_PASS_K}: mean over entries of (c/n)^k; k = {k}; bootstrap "
                 f"intervals over conversations. Steps: model calls per finished episode; cost and latency: sums "
                 f"over all episodes.")

    def _models_section(self) -> ReportSection:
        """The section of pass^k per model."""
        rows = [[m.model, fmt_num(m.variants), fmt_num(m.entries), fmt_num(m.episodes), fmt_num(m.unfinished),
                 with_ci(m.accuracy, m.accuracy_ci), _fraction_ci(m.pass_k_tau.value, m.pass_k_tau.ci),
                 _fraction_ci(m.pass_k_ticket.value, m.pass_k_ticket.ci), fmt_num(m.cost_usd, 4),
                 fmt_num(m.latency_s, 1)] for m in self.models]
        return _section(
            "conv-models", "pass^k per model",
            _grid(["model", "variants", "entries", "episodes", "unfinished", "accuracy %", TAU_BENCH_PASS_K,
                    TICKET_BENCH_PASS_K, "cost USD", "latency s"], rows, [False] + [True] * 9),
            note="Entries are the model's (variant, conversation) pairs; the intervals resample conversations, "
                 "each with all its variants' entries.")

    def _comparisons_section(self) -> ReportSection:
        """The section of paired comparisons between variants."""
        table = None
        if self.comparisons:
            rows = [[c.model, self._name(c.reference), self._name(c.other), fmt_num(c.entries),
                     pct(c.reference_rate), pct(c.other_rate),
                     with_ci(c.diff, c.diff_ci, signed=True), fmt_num(c.b), fmt_num(c.c), pval(c.p_value),
                     pval(c.p_holm)] for c in self.comparisons]
            table = _grid(["model", "reference", "other", "entries", "reference %", "other %", "diff pp",
                            "b", "c", "p (McNemar)", "p (Holm)"], rows, [False, False, False] + [True] * 8)
        return _section(
            "conv-comparisons", "Paired comparisons between variants", table,
            empty="No model has two variants to compare.",
            note=f"On the conversations both variants finished: mean pass rate (c/n), other - reference in "
                 f"percentage points with a paired bootstrap interval; b / c: entries only the reference / only "
                 f"the other has majority-valid (2c > n); exact McNemar on b and c, Holm over the model's pairs. "
                 f"Each variant against the model's first; every pair when a model has at most {MAX_ALL_PAIRS} "
                 f"variants.")

    def _turns_section(self) -> ReportSection:
        """The section of accuracy by turn position."""
        table = None
        depth = max((len(t.positions) for t in self.turn_accuracy), default=0)
        turns = sorted({p.turn for t in self.turn_accuracy for p in t.positions})
        if depth:
            rows = []
            for t in self.turn_accuracy:
                at = {p.turn: p for p in t.positions}
                rows.append([t.model, self._name(t.variant_id)]
                            + [f"{pct(at[i].accuracy)} ({at[i].n:,})" if i in at else DASH for i in turns])
            table = _grid(["model", "variant"] + [f"turn {i}" for i in turns], rows,
                           [False, False] + [True] * len(turns))
        return _section(
            "conv-turns", "Accuracy by turn position", table, empty="No finished episode has turns.",
            note="Per turn index: % valid of the finished episodes that have that turn (n in parentheses).")

    def _divergence_section(self) -> ReportSection:
        """The section of the first turn where two variants diverge."""
        table = None
        if self.divergence:
            dturns = sorted({t for d in self.divergence for t, _ in d.by_turn})
            rows = []
            for d in self.divergence:
                first_at = dict(d.by_turn)
                rows.append([d.model, self._name(d.reference), self._name(d.other), fmt_num(d.compared)]
                            + [fmt_num(first_at.get(i, 0)) for i in dturns]
                            + [fmt_num(d.never), DASH if math.isnan(d.median_turn) else f"{d.median_turn:g}"])
            table = _grid(["model", "reference", "other", "compared"] + [f"turn {i}" for i in dturns]
                           + ["never", "median turn"], rows, [False, False, False] + [True] * (len(dturns) + 3))
        return _section(
            "conv-divergence", "First turn where two variants diverge", table,
            empty="No pair of variants to compare.",
            note="Per (conversation, repeat) both variants finished: the first turn index whose validity differs "
                 "(over the turns both episodes have); never: they agree on every turn. Median over those that "
                 "diverge.")

    def _failures_section(self) -> ReportSection:
        """The section of the failure modes of failed episodes."""
        modes = _mode_order({m.mode for f in self.failure_modes for m in f.modes})
        if modes:
            rows = []
            for f in self.failure_modes:
                of_mode = {m.mode: m for m in f.modes}
                rows.append([f.model, self._name(f.variant_id), fmt_num(f.failed)]
                            + [f"{of_mode[m].count:,} ({pct(of_mode[m].share)}%)" if m in of_mode else DASH
                               for m in modes])
            return _section(
                "conv-failures", "Failure modes of failed episodes",
                _grid(["model", "variant", "failed"] + list(modes), rows, [False, False] + [True] * (len(modes) + 1)),
                note="Failed episodes by the failure mode of their first failed turn (count, share of the "
                     "variant's failed episodes):",
                glossary=tuple((m, _describe(m)) for m in modes))
        return _section("conv-failures", "Failure modes of failed episodes", None, empty="No failed episode.")

    def _native_section(self) -> ReportSection:
        """The section of native against prompt call mode."""
        rows = []
        for g in self.native_gap:
            if not g.available:
                rows.append([g.model, f"not available: {g.note}", DASH, DASH, DASH, DASH, DASH])
                continue
            if g.overall is not None:
                o = g.overall
                rows.append([g.model, f"overall ({o.natives} native, {o.prompts} prompt)", "", fmt_num(o.entries),
                             pct(o.native_rate), pct(o.prompt_rate), with_ci(o.diff, o.diff_ci, signed=True)])
            if not g.pairs:
                rows.append([g.model, f"pairs not available: {g.note}", DASH, DASH, DASH, DASH, DASH])
            for p in g.pairs:
                rows.append([g.model, self._name(p.native), self._name(p.prompt), fmt_num(p.entries),
                             pct(p.native_rate), pct(p.prompt_rate), with_ci(p.diff, p.diff_ci, signed=True)])
        return _section(
            "conv-native", "Native vs prompt call mode",
            _grid(["model", "native", "prompt", "entries", "native %", "prompt %", "native - prompt pp"],
                   rows, [False, False, False, True, True, True, True]) if rows else None,
            note="Native variant against the prompt variant equal to it in every other dimension both have (a "
                 "missing dimension matches any value); overall: mean over native variants minus mean over prompt "
                 "variants on the conversations all of them finished. Mean per-entry pass rate, paired bootstrap "
                 "interval in percentage points.")

    # -------------------------------------------------------------------------------------------- console

    def console(self) -> str:
        """A few plain lines for the terminal: per model, accuracy, both pass^k, best and worst variant, gap."""
        k = self.k
        out = [f"conversation report: {self.finished:,} finished episodes, {self.unfinished:,} unfinished "
               f"(not scored), k = {k}", _safe(f"  {self._rules()}")]
        for m in self.models:
            out.append(_safe(
                f"  {m.model}: accuracy {with_ci(m.accuracy, m.accuracy_ci)}%, pass^{k} tau-bench "
                f"{_fraction_ci(m.pass_k_tau.value, m.pass_k_tau.ci)}, Ticket-Bench "
                f"{_fraction_ci(m.pass_k_ticket.value, m.pass_k_ticket.ci)} ({m.variants} variants, "
                f"{m.entries:,} entries)"))
            scored = [v for v in self.variants if v.model == m.model and v.episodes]
            if len(scored) > 1:
                top = max(v.accuracy for v in scored)
                bottom = min(v.accuracy for v in scored)
                if top == bottom:  # a tie is named as one, never the same variant as best and worst
                    out.append(_safe(f"    all {len(scored)} variants tie at {pct(top)}%"))
                else:
                    out.append(_safe(f"    best {self._names(scored, top)} {pct(top)}%, worst "
                                     f"{self._names(scored, bottom)} {pct(bottom)}%"))
            gap = next((g for g in self.native_gap if g.model == m.model), None)
            if gap is not None and gap.overall is not None:
                out.append(f"    native - prompt: {with_ci(gap.overall.diff, gap.overall.diff_ci, signed=True)} pp "
                           f"on {gap.overall.entries:,} conversations")
        return "\n".join(out) + "\n"


def _mode_order(modes: set[str]) -> list[str]:
    known = [m.value for m in TurnFailureMode if m.value in modes]
    return known + sorted(modes - set(known))


def _describe(mode: str) -> str:
    try:
        return TurnFailureMode(mode).description
    except ValueError:
        if mode == CALL_ERROR:
            return "a step's call failed for good (an error retries could not fix), which ended the episode"
        return "no failure mode recorded" if mode == UNKNOWN_MODE else "not a TurnFailureMode"


# ------------------------------------------------------------------------------------------ computation


@dataclass
class _ModelData:
    """One model's episodes as arrays: variants x conversations x repeats (x turns)."""

    model: str
    vids: list[str]
    convs: list[str]
    valid: np.ndarray  # int8 (V, C, R): 1 valid, 0 invalid, -1 no finished episode
    turns: np.ndarray  # int8 (V, C, R, T): 1 valid turn, 0 failed, -1 no such turn / unfinished
    episodes: dict[str, list[Result]]
    resampler: Resampler  # bootstrap weights over conversations

    @cached_property
    def correct(self) -> np.ndarray:
        """(V, C): valid finished repeats per entry."""
        return np.asarray((self.valid == 1).sum(axis=2), dtype=np.int64)

    @cached_property
    def trials(self) -> np.ndarray:
        """(V, C): finished repeats per entry."""
        return np.asarray((self.valid >= 0).sum(axis=2), dtype=np.int64)


def _mode_of(dims: Mapping[str, str]) -> str:
    return str(dims.get("call_mode", PROMPT))


def _model_data(model: str, episodes: Sequence[Result], order: Sequence[str], n_resamples: int,
                seed: int) -> _ModelData:
    present = {e.variant_id for e in episodes}
    vids = [v for v in order if v in present]
    convs = sorted({e.conversation_id for e in episodes})
    repeats = sorted({e.repeat for e in episodes})
    vi, ci, ri = ({v: i for i, v in enumerate(vids)}, {c: i for i, c in enumerate(convs)},
                  {r: i for i, r in enumerate(repeats)})
    depth = max(((t.turn or 0) + 1 for e in episodes if e.valid is not None for t in e.turns), default=0)
    valid = np.full((len(vids), len(convs), len(repeats)), -1, dtype=np.int8)
    turns = np.full((len(vids), len(convs), len(repeats), depth), -1, dtype=np.int8)
    by_variant: dict[str, list[Result]] = defaultdict(list)
    for e in episodes:
        by_variant[e.variant_id].append(e)
        if e.valid is None:
            continue
        v, c, r = vi[e.variant_id], ci[e.conversation_id], ri[e.repeat]
        valid[v, c, r] = 1 if e.valid else 0
        for t in e.turns:
            if t.turn is not None and t.turn >= 0:
                turns[v, c, r, t.turn] = 1 if t.valid else 0
    resampler = Resampler(len(convs), n_resamples, stats.seed_for(model, base=seed))
    return _ModelData(model, vids, convs, valid, turns, dict(by_variant), resampler)


def _boot_ratio(resampler: Resampler, num: np.ndarray, den: np.ndarray, confidence: float) -> list[Interval]:
    """Percentile intervals of resampled ``sum(num) / sum(den)`` per column (rows: the resampled units)."""
    boot = resampler.ratio(num, den)
    return [ci_of(boot[:, j], confidence) for j in range(num.shape[1])]


def _boot_means(resampler: Resampler, values: np.ndarray, mask: np.ndarray, confidence: float) -> list[Interval]:
    """Percentile intervals of resampled ``sum(values * mask) / sum(mask)`` per column (rows: the resampled units)."""
    num = np.where(mask, np.nan_to_num(values), 0.0)
    return _boot_ratio(resampler, num, mask.astype(np.float64), confidence)


def _masked_mean(values: np.ndarray, mask: np.ndarray) -> float:
    n = int(mask.sum())
    return float(np.where(mask, np.nan_to_num(values), 0.0).sum() / n) if n else math.nan


def _pass_k_arrays(correct: np.ndarray, trials: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-entry pass^k, (tau-bench, Ticket-Bench), NaN where an entry has no finished repeat."""
    has = trials > 0
    tau = np.full(correct.shape, np.nan)
    ticket = np.full(correct.shape, np.nan)
    if has.any():
        tau[has] = stats.pass_hat_k_per_case(correct[has], trials[has], k, unbiased=True)
        ticket[has] = stats.pass_hat_k_per_case(correct[has], trials[has], k)
    return tau, ticket


def _pass_k(where: tuple[str, str, str, str], k: int, values: np.ndarray, mask: np.ndarray, ci: Interval, *,
            tau: bool) -> PassK:
    """The pass^k of ``where`` (model, variant id, label, language): the mean of the per-entry ``values`` over the
    entries ``mask`` holds, tau-bench's (``tau``) or Ticket-Bench's."""
    name, definition = ((TAU_BENCH_PASS_K, TAU_BENCH_DEFINITION) if tau
                        else (TICKET_BENCH_PASS_K, TICKET_BENCH_DEFINITION))
    return PassK(*where, k, _masked_mean(values, mask), ci, int(mask.sum()), name, definition)


@dataclass(frozen=True)
class _VariantScores:
    """What both reports show of one variant of a ``_ModelData``: episodes (unfinished included), how many are
    finished and valid, entries, accuracy with its Wilson interval, both pass^k."""

    episodes: list[Result]
    finished: int
    valid: int
    entries: int
    accuracy: float
    accuracy_ci: Interval
    pass_k_tau: PassK
    pass_k_ticket: PassK


def _variant_scores(md: _ModelData, has: np.ndarray, tau: np.ndarray, ticket: np.ndarray, k: int,
                    confidence: float, *, labels: Mapping[str, str] | None = None,
                    language: str = "overall") -> list[_VariantScores]:
    """Per variant of ``md`` (in ``md.vids`` order), from its per-entry pass^k arrays (``_pass_k_arrays``).

    The pass^k records name the variant by its ``labels`` entry (its id where none) and the ``language`` of
    ``md``'s episodes (``overall``: all of them)."""
    tau_ci = _boot_means(md.resampler, tau.T, has.T, confidence)
    ticket_ci = _boot_means(md.resampler, ticket.T, has.T, confidence)
    out = []
    for i, vid in enumerate(md.vids):
        finished, valid = int(md.trials[i].sum()), int(md.correct[i].sum())
        where = (md.model, vid, (labels or {}).get(vid, vid), language)
        out.append(_VariantScores(
            md.episodes[vid], finished, valid, int(has[i].sum()), valid / finished if finished else math.nan,
            stats.wilson_interval(valid, finished, confidence),
            _pass_k(where, k, tau[i], has[i], tau_ci[i], tau=True),
            _pass_k(where, k, ticket[i], has[i], ticket_ci[i], tau=False)))
    return out


def episode_failure_mode(e: Result) -> str | None:
    """The failure mode a report shows for an episode: its own, or ``call_error`` for one a step's error ended."""
    return e.failure_mode or (CALL_ERROR if e.status == "error" else None)


def _failure_modes(episodes: Sequence[Result]) -> tuple[int, tuple[FailureModeCount, ...]]:
    """The failed episodes (``valid is False``) of ``episodes``: how many, and per failure mode (most first)."""
    failed = [e for e in episodes if e.valid is False]
    counts = Counter(episode_failure_mode(e) or UNKNOWN_MODE for e in failed)
    return len(failed), tuple(FailureModeCount(mode, n, n / len(failed), _describe(mode))
                              for mode, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _sums(episodes: Sequence[Result]) -> tuple[float | None, int, float]:
    costs = [e.cost_usd for e in episodes if e.cost_usd is not None]
    return (float(sum(costs)) if costs else None, len(episodes) - len(costs),
            float(sum(e.latency_s or 0.0 for e in episodes)))


def _pairs(n_variants: int) -> list[tuple[int, int]]:
    if n_variants <= MAX_ALL_PAIRS:
        return [(a, b) for a in range(n_variants) for b in range(a + 1, n_variants)]
    return [(0, b) for b in range(1, n_variants)]


def _dims_match(native: Mapping[str, str], prompt: Mapping[str, str]) -> bool:
    """Equal in every dimension both have, ``call_mode`` aside (a dimension one lacks matches any value)."""
    return all(str(native[key]) == str(prompt[key]) for key in native.keys() & prompt.keys() if key != "call_mode")


def _resolve_k(data: Sequence[_ModelData], k: int | None) -> int:
    shortest: tuple[int, str, str, str] | None = None
    for md in data:
        trials = md.trials
        has = trials > 0
        if not has.any():
            continue
        v, c = np.unravel_index(int(np.argmin(np.where(has, trials, np.iinfo(np.int64).max))), trials.shape)
        n = int(trials[v, c])
        if shortest is None or n < shortest[0]:
            shortest = (n, md.model, md.vids[v], md.convs[c])
    available = 1 if shortest is None else max(1, shortest[0])
    if k is None:
        return available
    if shortest is not None and k > shortest[0]:
        n, model, vid, conv = shortest
        raise ValueError(f"k={k} is larger than the available repeats: model {model!r}, variant {vid!r}, "
                         f"conversation {conv!r} has {n} finished repeat(s); use k <= {n}")
    return k


def check_inputs(episodes: Sequence[Result], variants: Mapping[str, Mapping[str, str]], *, k: int | None,
                 confidence: float, n_resamples: int) -> None:
    """``ValueError`` for what no report can be made of: a confidence outside (0, 1), ``n_resamples < 1``,
    ``k < 1``, an episode naming a variant not in ``variants``, two episodes of one (model, variant,
    conversation, repeat). Shared by ``conversation_report`` and ``_languages.language_report``."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    if k is not None and k < 1:
        raise ValueError(f"k must be >= 1, got k={k}")
    seen: set[tuple[str, str, str, int]] = set()
    for e in episodes:
        if e.variant_id not in variants:
            raise ValueError(f"episode of model {e.model!r}, conversation {e.conversation_id!r}, repeat {e.repeat} "
                             f"names variant {e.variant_id!r}, which is not in variants")
        key = (e.model, e.variant_id, e.conversation_id, e.repeat)
        if key in seen:
            raise ValueError(f"two episodes for model {e.model!r}, variant {e.variant_id!r}, conversation "
                             f"{e.conversation_id!r}, repeat {e.repeat}")
        seen.add(key)


def conversation_report(
    episodes: Sequence[Result],
    variants: Mapping[str, Mapping[str, str]],
    *,
    k: int | None = None,
    confidence: float = stats.DEFAULT_CONFIDENCE,
    n_resamples: int = stats.DEFAULT_RESAMPLES,
    seed: int = stats.DEFAULT_SEED,
    labels: Mapping[str, str] | None = None,
) -> ConversationReport:
    """The report of a multi-turn conversation run (every number is explained in the module docstring).

    ``episodes``: the run's ``Result`` records, any order, unfinished ones included (counted, not
    scored). ``variants``: variant id -> its dimension values as strings (``call_mode``, ``return_format``,
    ...); its order decides each model's baseline (its first variant) and the order of the rows. ``k``: the
    pass^k's k, by default the largest number of finished repeats every entry has (at least 1).
    ``confidence``: of every interval. ``n_resamples`` and ``seed``: of the bootstrap (deterministic).

    Raises ``ValueError`` for an episode whose variant is not in ``variants``, two episodes with the same
    (model, variant, conversation, repeat), ``k < 1``, a ``k`` some entry has fewer finished repeats for,
    a confidence outside (0, 1) or ``n_resamples < 1``.
    """
    check_inputs(episodes, variants, k=k, confidence=confidence, n_resamples=n_resamples)
    by_model: dict[str, list[Result]] = defaultdict(list)
    for e in episodes:
        by_model[e.model].append(e)
    order = list(variants)
    data = [_model_data(m, by_model[m], order, n_resamples, seed) for m in sorted(by_model)]
    k = _resolve_k(data, k)

    summaries: list[VariantConversationSummary] = []
    models: list[ModelConversationSummary] = []
    comparisons: list[VariantComparison] = []
    turn_accuracy: list[TurnAccuracy] = []
    divergence: list[Divergence] = []
    failures: list[EpisodeFailureModes] = []
    gaps: list[NativeGap] = []
    for md in data:
        correct, trials = md.correct, md.trials
        has = trials > 0
        tau, ticket = _pass_k_arrays(correct, trials, k)
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = np.where(has, correct / np.where(has, trials, 1), np.nan)
        scores = _variant_scores(md, has, tau, ticket, k, confidence, labels=labels)

        # 1. per variant
        for vid, sc in zip(md.vids, scores, strict=True):
            cost, unknown, latency = _sums(sc.episodes)
            steps = sum(e.steps for e in sc.episodes if e.valid is not None)
            summaries.append(VariantConversationSummary(
                model=md.model, variant_id=vid, call_mode=_mode_of(variants[vid]), entries=sc.entries,
                episodes=sc.finished, unfinished=len(sc.episodes) - sc.finished, valid=sc.valid,
                accuracy=sc.accuracy, accuracy_ci=sc.accuracy_ci, pass_k_tau=sc.pass_k_tau,
                pass_k_ticket=sc.pass_k_ticket, mean_steps=steps / sc.finished if sc.finished else math.nan,
                cost_usd=cost, cost_unknown=unknown, latency_s=latency))

        # 2. per model: entries are (variant, conversation); conversations resampled as clusters
        per_conv = has.sum(axis=0).astype(np.float64)[:, None]
        tau_sum = np.where(has, np.nan_to_num(tau), 0.0).sum(axis=0)[:, None]
        ticket_sum = np.where(has, np.nan_to_num(ticket), 0.0).sum(axis=0)[:, None]
        m_ci = _boot_ratio(md.resampler, np.concatenate([tau_sum, ticket_sum], axis=1),
                           np.concatenate([per_conv, per_conv], axis=1), confidence)
        all_eps = [e for sc in scores for e in sc.episodes]
        finished, n_valid = int(trials.sum()), int(correct.sum())
        cost, _, latency = _sums(all_eps)
        every = (md.model, "", "all variants", "overall")
        models.append(ModelConversationSummary(
            model=md.model, variants=len(md.vids), entries=int(has.sum()), episodes=finished,
            unfinished=len(all_eps) - finished, valid=n_valid, accuracy=n_valid / finished if finished else math.nan,
            accuracy_ci=stats.wilson_interval(n_valid, finished, confidence),
            pass_k_tau=_pass_k(every, k, tau, has, m_ci[0], tau=True),
            pass_k_ticket=_pass_k(every, k, ticket, has, m_ci[1], tau=False),
            cost_usd=cost, latency_s=latency))

        # 3. paired comparisons
        pairs = _pairs(len(md.vids))
        comparisons += _compare(md, pairs, has, rate, confidence)

        # 4. accuracy by turn position
        for i, vid in enumerate(md.vids):
            t = md.turns[i].reshape(md.turns.shape[1] * md.turns.shape[2], md.turns.shape[3])
            n_at = (t >= 0).sum(axis=0)
            ok_at = (t == 1).sum(axis=0)
            turn_accuracy.append(TurnAccuracy(md.model, vid, tuple(
                TurnPosition(j, int(n_at[j]), int(ok_at[j]), int(ok_at[j]) / int(n_at[j]),
                             stats.wilson_interval(int(ok_at[j]), int(n_at[j]), confidence))
                for j in range(len(n_at)) if n_at[j] > 0)))

        # 5. first divergence
        divergence += [_diverge(md, a, b) for a, b in pairs]

        # 6. failure modes
        for vid in md.vids:
            failures.append(EpisodeFailureModes(md.model, vid, *_failure_modes(md.episodes[vid])))

        # 7. native vs prompt
        gaps.append(_native_gap(md, variants, has, rate, confidence))

    n_all = len(episodes)
    finished = sum(1 for e in episodes if e.valid is not None)
    rules, disagreements = _argument_rules(episodes)
    return ConversationReport(
        k=k, confidence=confidence, n_resamples=n_resamples, seed=seed, episodes=n_all, finished=finished,
        unfinished=n_all - finished, variants=tuple(summaries), models=tuple(models),
        comparisons=tuple(comparisons), turn_accuracy=tuple(turn_accuracy), divergence=tuple(divergence),
        failure_modes=tuple(failures), native_gap=tuple(gaps), labels=dict(labels or {}), argument_rules=rules,
        argument_rule_disagreements=disagreements)


_RULE_NAMES = {"bfcl": "bfcl (lenient)", "strict": "strict"}


def _argument_rules(episodes: Sequence[Result]) -> tuple[tuple[str, ...], int]:
    """The argument rules of the finished episodes' stored verdicts, and their turns the other rule scores
    otherwise."""
    rules: set[str] = set()
    turns = 0
    for e in episodes:
        verdict = e.details.get("verdict") if e.valid is not None else None
        if not isinstance(verdict, Mapping):
            continue
        rules.add(str(verdict.get("argument_rule", "strict")))
        turns += sum(1 for turn in verdict.get("turns") or () if isinstance(turn, Mapping)
                     and "argument_rule_disagrees" in (turn.get("details") or {}))
    return tuple(sorted(rules)), turns


def _compare(md: _ModelData, pairs: Sequence[tuple[int, int]], has: np.ndarray, rate: np.ndarray,
             confidence: float) -> list[VariantComparison]:
    """Paired comparisons of a model's variants (module docstring)."""
    if not pairs:
        return []
    correct, trials = md.correct, md.trials
    majority = 2 * correct > trials
    shared = np.stack([has[a] & has[b] for a, b in pairs], axis=1)  # (C, P)
    diffs = np.stack([rate[b] - rate[a] for a, b in pairs], axis=1)
    cis = _boot_means(md.resampler, diffs, shared, confidence)
    rows = []
    for j, (a, b) in enumerate(pairs):
        s = shared[:, j]
        n = int(s.sum())
        only_ref = int(np.sum(s & majority[a] & ~majority[b]))
        only_other = int(np.sum(s & ~majority[a] & majority[b]))
        p = stats.mcnemar_exact(only_ref, only_other) if n else math.nan
        rows.append((a, b, n, _masked_mean(rate[a], s), _masked_mean(rate[b], s), _masked_mean(diffs[:, j], s),
                     cis[j], only_ref, only_other, p))
    adjusted = stats.holm([r[-1] for r in rows])
    return [VariantComparison(md.model, md.vids[a], md.vids[b], a == 0, n, ref, other, diff, ci, b_, c_, p, ph)
            for (a, b, n, ref, other, diff, ci, b_, c_, p), ph in zip(rows, adjusted, strict=True)]


def _diverge(md: _ModelData, a: int, b: int) -> Divergence:
    """Where variants ``a`` and ``b`` of a model first differ, per (conversation, repeat) both finished."""
    both = (md.valid[a] >= 0) & (md.valid[b] >= 0)  # (C, R)
    ta, tb = md.turns[a], md.turns[b]
    differ = (ta >= 0) & (tb >= 0) & (ta != tb)  # (C, R, T)
    any_differ = differ.any(axis=-1) if differ.shape[-1] else np.zeros(both.shape, dtype=bool)
    first = differ.argmax(axis=-1) if differ.shape[-1] else np.zeros(both.shape, dtype=np.int64)
    firsts = first[both & any_differ]
    turns, counts = np.unique(firsts, return_counts=True)
    return Divergence(md.model, md.vids[a], md.vids[b], int(both.sum()),
                      tuple((int(t), int(n)) for t, n in zip(turns, counts, strict=True)),
                      int(np.sum(both & ~any_differ)), float(np.median(firsts)) if firsts.size else math.nan)


def _native_gap(md: _ModelData, variants: Mapping[str, Mapping[str, str]], has: np.ndarray, rate: np.ndarray,
                confidence: float) -> NativeGap:
    """The native-vs-prompt gap of one model (module docstring)."""
    modes = [_mode_of(variants[v]) for v in md.vids]
    natives = [i for i, m in enumerate(modes) if m == NATIVE]
    prompts = [i for i, m in enumerate(modes) if m == PROMPT]
    if not natives or not prompts:
        missing = "native" if not natives else "prompt"
        return NativeGap(md.model, False, f"no {missing} variant", (), None)
    pairs = [(n, p) for n in natives for p in prompts if _dims_match(variants[md.vids[n]], variants[md.vids[p]])]
    columns = [(has[n] & has[p], rate[n] - rate[p]) for n, p in pairs]
    common = np.asarray(has[natives].all(axis=0) & has[prompts].all(axis=0))
    native_mean = np.nan_to_num(rate[natives]).mean(axis=0)
    prompt_mean = np.nan_to_num(rate[prompts]).mean(axis=0)
    columns.append((common, native_mean - prompt_mean))
    cis = _boot_means(md.resampler, np.stack([c[1] for c in columns], axis=1),
                      np.stack([c[0] for c in columns], axis=1), confidence)
    out_pairs = tuple(
        NativeGapPair(md.vids[n], md.vids[p], int(s.sum()), _masked_mean(rate[n], s), _masked_mean(rate[p], s),
                      _masked_mean(d, s), ci)
        for (n, p), (s, d), ci in zip(pairs, columns[:-1], cis[:-1], strict=True))
    overall = NativeGapOverall(len(natives), len(prompts), int(common.sum()), _masked_mean(native_mean, common),
                               _masked_mean(prompt_mean, common), _masked_mean(native_mean - prompt_mean, common),
                               cis[-1])
    note = "" if out_pairs else "no prompt variant equal to a native one in the other dimensions"
    return NativeGap(md.model, True, note, out_pairs, overall)
