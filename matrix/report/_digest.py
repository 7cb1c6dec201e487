"""What a run's numbers mean, in a few lines: the end of ``promptgrid run`` and a note in the report.

A table of accuracies alone does not say why they are what they are (26 rows
of 0.0 % when a small model answers in prose) nor whether two variants can be
told apart. ``digest`` counts, per model, the failure modes behind the
numbers (the report's ``failure_mode`` of each failed job), derives one
sentence on what they mean from those counts, and flags a sample too small
to compare variants (``SampleNote``, also used by the report's summary).
"""

from __future__ import annotations

import math
import os
import shlex
import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from promptgrid.display import escape_controls
from promptgrid.matrix.running.results import ResultRow
from promptgrid.matrix.scoring.verdict import FailureMode

from . import stats
from ._call_modes import CALL_MODES, PARSE_FAILURE_MODES, call_mode_of, parses_as_call
from ._format import pct
from ._rows import Rows
from ._usage import failure_mode

__all__ = ["MIN_N", "ModeCount", "ModelDigest", "SampleNote", "digest", "explain", "sample_note"]

MIN_N = 30
"""Below this many scored jobs per variant a sample is flagged as small, whatever the spread."""

TOP_MODES = 3

_MODES = {m.value: m for m in FailureMode}
CALL_ERROR = "call_error"  # what the report's failure_mode names a failed call


@dataclass(frozen=True)
class ModeCount:
    """One failure mode of a model: how many of its scored jobs failed this way, and their share."""

    mode: str
    """A ``FailureMode`` value, ``call_error`` for a failed call, else the lower-cased error code."""
    count: int
    share: float
    """Of the model's scored jobs (all variants)."""

    @property
    def title(self) -> str:
        """The mode in words for a one-line list: ``prose instead of call``."""
        return self.mode.replace("_", " ")

    @property
    def description(self) -> str:
        """What the model did, as a sentence fragment (``answered in prose instead of calling a function``)."""
        if self.mode in _MODES:
            return _MODES[self.mode].description
        return "the call failed with an error" if self.mode == CALL_ERROR else f"failed with {self.mode}"


@dataclass(frozen=True)
class SampleNote:
    """How far apart two variants must be to differ beyond sampling noise, when the sample is too small for it.

    ``width`` is the median width of the variants' 95 % intervals; two
    variants each measured that precisely differ meaningfully only by about
    ``width / sqrt(2)`` (the half-widths combined), which is ``detectable``.
    """

    n_min: int
    n_max: int
    width: float
    detectable: float
    variants: int

    def sentence(self) -> str:
        n = f"n={self.n_min}" if self.n_min == self.n_max else f"n={self.n_min}-{self.n_max}"
        if self.variants < 2:
            return f"small sample: {n}, 95% interval about {_pp(self.width)} pp wide."
        return (f"small sample: {n} per variant, 95% intervals about {_pp(self.width)} pp wide; differences "
                f"between variants below {_pp(self.detectable)} pp are not meaningful.")


def _pp(x: float) -> str:
    return f"{100 * x:.0f}" if 100 * x >= 10 else f"{100 * x:.1f}"


def sample_note(ns: Sequence[int], widths: Sequence[float], accuracies: Sequence[float]) -> SampleNote | None:
    """The note for one model's variants (scored jobs, interval widths, accuracies), or None when not small.

    Small means fewer than ``MIN_N`` jobs in some variant, or a spread
    (best - worst accuracy) below what the intervals can detect.
    """
    finite = [w for w in widths if not math.isnan(w)]
    if not ns or not finite:
        return None
    width = statistics.median(finite)
    detectable = width / math.sqrt(2)
    spread = max(accuracies) - min(accuracies) if len(accuracies) > 1 else math.inf
    if min(ns) >= MIN_N and spread >= detectable:
        return None
    return SampleNote(min(ns), max(ns), width, detectable, len(ns))


@dataclass(frozen=True)
class ModelDigest:
    """One model's numbers in words: its top failure modes, what they mean, and a small-sample note."""

    model: str
    scored: int
    correct: int
    errors: int
    variants: int
    spread: float
    """Best minus worst variant accuracy (0 with one variant)."""
    modes: tuple[ModeCount, ...]
    """The most frequent failure modes, most frequent first (``TOP_MODES`` at most)."""
    format_failures: int
    """Scored jobs whose answer held no call in the requested format (parse-level failure modes)."""
    top_format: str
    """The most frequent of those modes ('' when there is none)."""
    sample: SampleNote | None
    parse_by_mode: tuple[tuple[str, int, int], ...] = ()
    """Per call mode (dimension order): (mode, answers that parse as calls, scored jobs); only when the model
    ran more than one call mode."""
    adaptive: bool = False
    """An adaptive run: each variant ran its own cells, so the spread above is not compared; the adaptive study's
    best, worst and spread are (``meaning`` says so)."""

    @property
    def accuracy(self) -> float:
        return self.correct / self.scored if self.scored else math.nan

    def modes_line(self) -> str:
        """``prose instead of call 96% (25/26), no call 4% (1/26)`` (``none`` when nothing failed)."""
        return ", ".join(f"{m.title} {pct(m.share, 0)}% ({m.count}/{self.scored})" for m in self.modes) or "none"

    def parse_line(self) -> str:
        """``prompt 0% (0/12), constrained 100% (12/12)``: answers that parse as calls per call mode."""
        return ", ".join(f"{mode} {pct(ok / n, 0)}% ({ok}/{n})" for mode, ok, n in self.parse_by_mode)

    def meaning(self) -> str:
        """One sentence on what this model's numbers mean, chosen from its counts."""
        acc, fmt = self.accuracy, self.format_failures / self.scored
        top = self.modes[0].description if self.modes else ""
        if self.errors * 2 >= self.scored:
            return (f"{self.errors} of {self.scored} jobs are failed calls, counted as wrong: the accuracy "
                    "measures the errors, not the model; fix their cause and re-run with --retry-errors.")
        if fmt >= 0.5:
            head = "accuracy is about 0 because" if acc < 0.05 else "accuracy mostly measures format compliance:"
            return (f"{head} {pct(fmt, 0)}% of answers hold no call in the requested format (most often it "
                    f"{_MODES[self.top_format].description}); the model does not follow the output format, "
                    "so the variants say little about how the prompt format changes function calling.")
        if acc < 0.05 and top:
            return (f"accuracy is about 0, though {pct(1 - fmt, 0)}% of answers are calls in the requested format: "
                    f"most failed answers {top}.")
        if acc >= 0.95:
            return (f"{pct(acc)}% of answers are correct: at this ceiling the variants can hardly be told apart; "
                    "a harder dataset would separate them.")
        spread = f" (best - worst variant {pct(self.spread)} pp)" if self.variants > 1 else ""
        if self.adaptive and self.variants > 1:
            spread = " (each ran its own cells: best, worst and spread are the adaptive study's, below)"
        most = f"; most failed answers {top}" if top else ""
        return f"{pct(acc)}% of answers are correct over {self.variants} variant(s){spread}{most}."


def digest(rows: Rows, confidence: float = stats.DEFAULT_CONFIDENCE) -> list[ModelDigest]:
    """Per model (in order of first appearance): counts, top failure modes and the small-sample note.

    ``rows``: ``ResultRow`` or dicts in the export's layout; none gives ``[]``. Rows without a verdict or
    error (pending, unscored) are left out, as in every rate of the report. Intervals are Wilson intervals
    over a variant's jobs (the report's, when each case was asked once).
    """
    cells: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    modes: dict[str, Counter[str]] = defaultdict(Counter)
    errors: Counter[str] = Counter()
    parse: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for i, r in enumerate(rows, 1):
        j = r if isinstance(r, ResultRow) else ResultRow.from_dict(r, where=f"row {i}")
        if not j.scored:
            continue
        cell = cells[j.model][j.variant_id]
        cell[0] += 1
        if j.correct:
            cell[1] += 1
        else:
            modes[j.model][failure_mode(j)] += 1
        errors[j.model] += j.error is not None
        p = parse[j.model][call_mode_of(j.dimensions)]
        p[0] += parses_as_call(j)
        p[1] += 1
    out = []
    for model, by_variant in cells.items():
        counts = list(by_variant.values())
        scored = sum(n for n, _ in counts)
        accs = [ok / n for n, ok in counts]
        widths = [hi - lo for lo, hi in (stats.wilson_interval(ok, n, confidence) for n, ok in counts)]
        ranked = sorted(modes[model].items(), key=lambda kv: (-kv[1], kv[0]))
        out.append(ModelDigest(
            model=model, scored=scored, correct=sum(ok for _, ok in counts), errors=errors[model],
            variants=len(counts), spread=max(accs) - min(accs),
            modes=tuple(ModeCount(m, c, c / scored) for m, c in ranked[:TOP_MODES]),
            format_failures=sum(c for m, c in modes[model].items() if m in PARSE_FAILURE_MODES),
            top_format=next((m for m, _ in ranked if m in PARSE_FAILURE_MODES), ""),
            sample=sample_note([n for n, _ in counts], widths, accs),
            parse_by_mode=_parse_by_mode(parse[model])))
    return out


def _parse_by_mode(counts: dict[str, list[int]]) -> tuple[tuple[str, int, int], ...]:
    if len(counts) < 2:
        return ()
    rank = {m: i for i, m in enumerate(CALL_MODES)}
    return tuple((m, ok, n) for m, (ok, n) in sorted(counts.items(), key=lambda kv: (rank.get(kv[0], 99), kv[0])))


def explain(rows: Rows, run_dir: str | os.PathLike[str], adaptive: Sequence[str] = ()) -> str:
    """The lines ``promptgrid run`` prints under its accuracy table: per model the top failure modes, what the
    numbers mean and a small-sample note, then the next command (``promptgrid report RUN_DIR``). ``adaptive``:
    the models of an adaptive run, whose best, worst and spread are the adaptive study's (printed after these
    lines), not their measured variants' over different case sets."""
    lines = [""]
    for d in digest(rows):
        if d.model in adaptive:
            d = replace(d, adaptive=True)
        lines.append(f"{d.model}: top failure modes (share of answers): {d.modes_line()}.")
        lines.append(f"  {_capital(d.meaning())}")
        if d.parse_by_mode:
            lines.append(f"  Answers that parse as calls, per call mode: {d.parse_line()}.")
        if d.sample is not None:
            lines.append(f"  {_capital(d.sample.sentence())}")
    page = Path(run_dir) / "report" / "report.html"
    lines.append(f"next: promptgrid report {shlex.quote(str(run_dir))}  (intervals, tests against the baseline, "
                 f"effects; add --format html to write {page} with examples of each failure)")
    return escape_controls("\n".join(lines))  # model names and paths reach a terminal


def _capital(sentence: str) -> str:
    return sentence[:1].upper() + sentence[1:]
