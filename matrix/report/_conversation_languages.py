"""Reports per language of a multilingual conversation run: accuracy, pass^k, points against English, answers.

``language_report(episodes, variants)`` reads the ``Result`` records of
a run whose conversations come in several languages (``mini-mt``, a
translated BFCL set: each episode has its ``language`` and its ``template``,
the id its conversation shares with its translations) and returns a
``LanguageReport``: frozen dataclasses with ``to_dict()`` (plain JSON data),
``to_markdown()`` and ``console()``. ``promptgrid report DIR`` adds it after the
conversation report (``_report.py``) when the run has more than one language.

The words of ``_report.py`` apply (episode, finished and unfinished, entry,
pass rate c/n, k). Unfinished episodes (``valid is None``) are counted per
language and left out of everything else: never scored, in no rate, no
pass^k, no difference, no answer-language share.

- ``level``: the MASSIVE-Agents translation level of a variant, from its
  ``instruction_language`` and ``description_language`` (grid
  ``massive_conversations``): ``english`` (both English), ``partial-descriptions``
  (descriptions only), ``partial-instructions`` (instructions only), ``full``
  (both), else ``instructions=X descriptions=Y``.
- per (model, variant, language): finished and unfinished episodes, accuracy
  (valid / finished, Wilson interval), pass^k in both named definitions
  (``_report.TAU_BENCH_PASS_K``, ``_report.TICKET_BENCH_PASS_K``, computed by
  ``_report``'s own helpers; entries are the language's conversations, the
  intervals resample them with the model's weights as ``_report`` does), and
  the failure modes of the failed episodes (count, share of the failed).
- points against the baseline language (``baseline``, English by default):
  per (model, variant, language other than the baseline), on the templates
  that have a finished episode in both languages (same model and variant):
  the mean over templates of the per-template pass rate in the language minus
  that in the baseline, with a percentile bootstrap interval over templates
  (one set of weights per model, ``_matrix.Resampler`` seeded by
  ``stats.seed_for(model, "templates", base=seed)``: every variant and
  language of a model is resampled on the same templates), and ``templates``,
  how many were paired. None when the run has no episode in the baseline
  language.
- final answers in the user's language: per (model, variant, language),
  over the turns of finished episodes whose final answer
  (``details["final_answers"]``) can be judged: not ``None``, not a call list
  or other structured text (after removing code fences, the text starts with
  ``[``, ``{`` or ``<`` and ends with ``]``, ``}`` or ``>``), and with at least
  ``MIN_ANSWER_LETTERS`` letters. ``judged`` of them, ``in_language`` detected
  as the conversation's language by ``promptgrid.translate.detect_language``
  (the script first, then langid among the plausible languages), ``share`` =
  in_language / judged, ``detected`` the counts per detected language; and
  ``answers`` (turns with a final answer), ``skipped`` (of them, not judged).

``to_dict()`` schema (fractions, not percentages; ``null`` for what cannot be
computed; every ``ci`` is ``[low, high]``)::

    {
      "baseline": str, "k": int, "confidence": float, "n_resamples": int, "seed": int,
      "min_answer_letters": int, "languages": [str], "unfinished_note": str,
      "pass_k_names": {"tau_bench": str, "ticket_bench": str},
      "episodes": int, "finished": int, "unfinished": int,
      "summaries": [{"model", "variant_id", "level", "language", "entries", "episodes", "unfinished", "valid",
                     "accuracy", "accuracy_ci", "pass_k_tau": PASSK, "pass_k_ticket": PASSK, "failed",
                     "failure_modes": [{"mode", "count", "share", "description"}]}],
      "against_baseline": [{"model", "variant_id", "level", "language", "baseline", "templates",
                            "baseline_rate", "language_rate", "diff", "diff_ci"}],
      "answer_language": [{"model", "variant_id", "level", "language", "answers", "skipped", "judged",
                           "in_language", "share", "detected": [{"language", "count"}]}]
    }

    PASSK = {"name", "definition", "k", "entries", "value", "ci"}   (PassK.named(), as in _report.py)
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from promptgrid.matrix.report import stats
from promptgrid.matrix.report._format import DASH, fmt_num, pct, with_ci
from promptgrid.matrix.report._matrix import Resampler
from promptgrid.matrix.report._model import PassK, _jsonable
from promptgrid.matrix.running.results import Result

from ._conversations import (
    TAU_BENCH_PASS_K,
    TICKET_BENCH_PASS_K,
    UNFINISHED_NOTE,
    FailureModeCount,
    Interval,
    ReportSection,
    _boot_means,
    _failure_modes,
    _fraction_ci,
    _grid,
    _masked_mean,
    _mode_order,
    _model_data,
    _pass_k_arrays,
    _resolve_k,
    _safe,
    _section,
    _summary_dict,
    _variant_scores,
    _VariantScores,
    check_inputs,
    sections_markdown,
)

__all__ = [
    "MIN_ANSWER_LETTERS",
    "AnswerLanguage",
    "LanguageGap",
    "LanguageConversationSummary",
    "LanguageReport",
    "answer_judgeable",
    "language_report",
    "translation_level",
]

MIN_ANSWER_LETTERS = 20
"""Fewest letters (``str.isalpha``) a final answer needs before its language is judged."""

_FENCE = re.compile(r"```.*?(?:```|$)", re.DOTALL)


def translation_level(dims: Mapping[str, Any]) -> str:
    """The MASSIVE-Agents level of a variant's dimensions (module docstring)."""
    instr = str(dims.get("instruction_language", "en"))
    desc = str(dims.get("description_language", "en"))
    levels = {("en", "en"): "english", ("en", "query"): "partial-descriptions",
              ("query", "en"): "partial-instructions", ("query", "query"): "full"}
    return levels.get((instr, desc), f"instructions={instr} descriptions={desc}")


def answer_judgeable(text: str | None, min_letters: int = MIN_ANSWER_LETTERS) -> bool:
    """Whether a final answer's language is judged: text, not a call list or structured data, enough letters."""
    if text is None:
        return False
    prose = _FENCE.sub(" ", text).strip()
    if prose[:1] in ("[", "{", "<") and prose[-1:] in ("]", "}", ">"):
        return False
    return sum(1 for ch in prose if ch.isalpha()) >= min_letters


# ----------------------------------------------------------------------------------------------- records


@dataclass(frozen=True)
class LanguageConversationSummary:
    """One (model, variant, language): episodes, accuracy, both pass^k and the failure modes.

    The per-language counterpart of ``_report.VariantConversationSummary`` (a single-turn report's
    ``LanguageSummary`` is another record: one model x variant over all its languages, MASSIVE-Agents Table 2).
    """

    model: str
    variant_id: str
    level: str
    language: str
    entries: int
    episodes: int
    unfinished: int
    valid: int
    accuracy: float
    accuracy_ci: Interval
    pass_k_tau: PassK
    pass_k_ticket: PassK
    failed: int
    failure_modes: tuple[FailureModeCount, ...]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data, both pass^k as ``PassK.named()`` (``PASSK`` in the module docstring)."""
        return _summary_dict(self)


@dataclass(frozen=True)
class LanguageGap:
    """One (model, variant, language) against the baseline language, paired by template.

    ``diff`` = mean over the ``templates`` paired of (pass rate in ``language`` - pass rate in ``baseline``),
    with a paired bootstrap interval over templates.
    """

    model: str
    variant_id: str
    level: str
    language: str
    baseline: str
    templates: int
    baseline_rate: float
    language_rate: float
    diff: float
    diff_ci: Interval


@dataclass(frozen=True)
class AnswerLanguage:
    """One (model, variant, language): how many judged final answers are in the conversation's language."""

    model: str
    variant_id: str
    level: str
    language: str
    answers: int
    skipped: int
    judged: int
    in_language: int
    share: float
    detected: tuple[tuple[str, int], ...]

    def to_dict(self) -> dict[str, Any]:
        """``_jsonable`` data, ``detected`` as ``[{"language", "count"}]``."""
        out: dict[str, Any] = _jsonable(self)
        out["detected"] = [{"language": lang, "count": n} for lang, n in self.detected]
        return out


@dataclass(frozen=True)
class LanguageReport:
    """Everything ``language_report`` computes; the module docstring explains every number."""

    baseline: str
    k: int
    confidence: float
    n_resamples: int
    seed: int
    min_answer_letters: int
    languages: tuple[str, ...]
    episodes: int
    finished: int
    unfinished: int
    summaries: tuple[LanguageConversationSummary, ...]
    against_baseline: tuple[LanguageGap, ...]
    answer_language: tuple[AnswerLanguage, ...]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (schema in the module docstring)."""
        return {
            "baseline": self.baseline, "k": self.k, "confidence": self.confidence,
            "n_resamples": self.n_resamples, "seed": self.seed, "min_answer_letters": self.min_answer_letters,
            "languages": list(self.languages), "unfinished_note": UNFINISHED_NOTE,
            "pass_k_names": {"tau_bench": TAU_BENCH_PASS_K, "ticket_bench": TICKET_BENCH_PASS_K},
            "episodes": self.episodes, "finished": self.finished, "unfinished": self.unfinished,
            "summaries": [s.to_dict() for s in self.summaries], "against_baseline": _jsonable(self.against_baseline),
            "answer_language": [a.to_dict() for a in self.answer_language],
        }

    def _names(self) -> dict[str, str]:
        """Variant id -> what the tables show: its level when levels tell the variants apart, else its id."""
        level = {s.variant_id: s.level for s in self.summaries}
        unique = len(set(level.values())) == len(level)
        return {vid: (lvl if unique else vid) for vid, lvl in level.items()}

    def to_markdown(self) -> str:
        """The section as Markdown: one GitHub table per part, a line under each saying what it shows."""
        out = ["## Conversations per language", "", self.overview(), ""]
        return "\n".join(out + sections_markdown(self.sections()))

    def overview(self) -> str:
        """The line under the section's title: the languages, the baseline, episodes, k, the intervals."""
        return (f"Languages: {', '.join(self.languages)}; baseline {self.baseline}. {self.finished:,} finished "
                f"episodes, {self.unfinished:,} unfinished (counted, not scored). k = {self.k}. Intervals: "
                f"{100 * self.confidence:g}%.")

    def sections(self) -> tuple[ReportSection, ...]:
        """The section's parts, each a table (or the sentence said in its place) and the note under it: what
        ``to_markdown`` writes and the HTML page shows."""
        name = self._names()
        out: list[ReportSection] = []
        rows = [[s.model, name[s.variant_id], s.language, fmt_num(s.entries), fmt_num(s.episodes),
                 fmt_num(s.unfinished), with_ci(s.accuracy, s.accuracy_ci),
                 _fraction_ci(s.pass_k_tau.value, s.pass_k_tau.ci),
                 _fraction_ci(s.pass_k_ticket.value, s.pass_k_ticket.ci)] for s in self.summaries]
        out.append(_section(
            "lang-accuracy", "Accuracy and pass^k per language",
            _grid(["model", "variant", "language", "entries", "episodes", "unfinished", "accuracy %",
                   TAU_BENCH_PASS_K, TICKET_BENCH_PASS_K], rows, [False] * 3 + [True] * 6),
            note=f"Accuracy: valid / finished episodes (Wilson interval). Entries: the language's conversations "
                 f"with a finished repeat; {TAU_BENCH_PASS_K} and {TICKET_BENCH_PASS_K} as in the conversation "
                 f"report, k = {self.k}, bootstrap intervals over conversations."))

        table = None
        if self.against_baseline:
            rows = [[g.model, name[g.variant_id], g.language, fmt_num(g.templates), pct(g.baseline_rate),
                     pct(g.language_rate), with_ci(g.diff, g.diff_ci, signed=True)] for g in self.against_baseline]
            table = _grid(["model", "variant", "language", "templates", f"{self.baseline} %", "language %",
                           "diff pp"], rows, [False] * 3 + [True] * 4)
        out.append(_section(
            "lang-baseline", f"Points against {self.baseline}", table,
            empty=f"No language to compare with {self.baseline} (no finished episode in {self.baseline}, or no "
                  "other language).",
            note=f"Per template finished in both languages (same model and variant): pass rate in the language "
                 f"minus pass rate in {self.baseline}, mean over templates in percentage points, paired bootstrap "
                 f"interval over templates."))

        rows = [[a.model, name[a.variant_id], a.language, fmt_num(a.answers), fmt_num(a.judged),
                 fmt_num(a.in_language), pct(a.share),
                 ", ".join(f"{lang} {n}" for lang, n in a.detected) or DASH] for a in self.answer_language]
        out.append(_section(
            "lang-answers", "Final answers in the user's language",
            _grid(["model", "variant", "language", "answers", "judged", "in language", "share %", "detected"],
                  rows, [False] * 3 + [True] * 4 + [False]),
            note=f"Turns of finished episodes ended by an answer; judged: those with at least "
                 f"{self.min_answer_letters} letters that are not a call list or structured data; share: judged "
                 f"answers detected (script, then langid) as the conversation's language."))

        modes = _mode_order({m.mode for s in self.summaries for m in s.failure_modes})
        table = None
        if modes:
            rows = []
            for s in self.summaries:
                of_mode = {m.mode: m for m in s.failure_modes}
                rows.append([s.model, name[s.variant_id], s.language, fmt_num(s.failed)]
                            + [f"{of_mode[m].count:,} ({pct(of_mode[m].share)}%)" if m in of_mode else DASH
                               for m in modes])
            table = _grid(["model", "variant", "language", "failed"] + modes, rows,
                          [False] * 3 + [True] * (len(modes) + 1))
        out.append(_section(
            "lang-failures", "Failure modes per language", table, empty="No failed episode.",
            note="Failed episodes by the failure mode of their first failed turn (count, share of the failed)."
            if modes else ""))
        return tuple(out)

    def console(self) -> str:
        """A few plain lines: per (model, variant), accuracy per language with the points against the baseline."""
        name = self._names()
        gaps = {(g.model, g.variant_id, g.language): g for g in self.against_baseline}
        answers = {(a.model, a.variant_id, a.language): a for a in self.answer_language}
        out = [f"per language ({', '.join(self.languages)}; baseline {self.baseline}): accuracy %, points against "
               f"{self.baseline} paired by template, final answers in the user's language"]
        groups: dict[tuple[str, str], list[LanguageConversationSummary]] = defaultdict(list)
        for s in self.summaries:
            groups[(s.model, s.variant_id)].append(s)
        for (model, vid), rows in groups.items():
            parts = []
            for s in rows:
                text = f"{s.language} {pct(s.accuracy)}"
                g = gaps.get((model, vid, s.language))
                if g is not None:
                    text += f" ({with_ci(g.diff, g.diff_ci, signed=True)} pp, {g.templates})"
                a = answers.get((model, vid, s.language))
                if a is not None and a.judged:
                    text += f" answers {a.in_language}/{a.judged}"
                parts.append(text)
            out.append(_safe(f"  {model} | {name[vid]}: " + "; ".join(parts)))
        return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------------ computation


def _template(e: Result) -> str:
    return e.template or e.conversation_id


def language_report(
    episodes: Sequence[Result],
    variants: Mapping[str, Mapping[str, str]],
    *,
    baseline: str = "en",
    k: int | None = None,
    confidence: float = stats.DEFAULT_CONFIDENCE,
    n_resamples: int = stats.DEFAULT_RESAMPLES,
    seed: int = stats.DEFAULT_SEED,
    min_answer_letters: int = MIN_ANSWER_LETTERS,
) -> LanguageReport:
    """The per-language report of a conversation run (every number is explained in the module docstring).

    ``episodes`` and ``variants`` as for ``conversation_report``; ``baseline``: the language the others are
    compared with; ``k``: the pass^k's k, by default the largest number of finished repeats every entry has.
    Raises ``ValueError`` as ``conversation_report`` does (an unknown variant, a duplicate episode, a bad
    ``k``, ``confidence`` or ``n_resamples``).
    """
    check_inputs(episodes, variants, k=k, confidence=confidence, n_resamples=n_resamples)
    groups: dict[tuple[str, str], list[Result]] = defaultdict(list)
    for e in episodes:
        groups[(e.model, e.language)].append(e)
    languages = sorted({lang for _, lang in groups}, key=lambda lang: (lang != baseline, lang))
    models = sorted({m for m, _ in groups})
    order = list(variants)
    data = {key: _model_data(key[0], eps, order, n_resamples, seed) for key, eps in groups.items()}
    k = _resolve_k(list(data.values()), k)
    level = {vid: translation_level(dims) for vid, dims in variants.items()}

    scores: dict[tuple[str, str, str], _VariantScores] = {}  # (model, language, variant) -> its scores
    for (model, lang), md in data.items():
        has = md.trials > 0
        tau, ticket = _pass_k_arrays(md.correct, md.trials, k)
        scores.update(((model, lang, vid), sc)
                      for vid, sc in zip(md.vids, _variant_scores(md, has, tau, ticket, k, confidence, language=lang),
                                         strict=True))
    summaries: list[LanguageConversationSummary] = []
    answers: list[AnswerLanguage] = []
    for model in models:
        for vid in order:
            for lang in languages:
                sc = scores.get((model, lang, vid))
                if sc is None:
                    continue
                summaries.append(_summary(sc, model, vid, lang, level[vid]))
                answers.append(_answers(sc.episodes, model, vid, level[vid], lang, min_answer_letters))
    gaps = [g for model in models
            for g in _gaps(model, [e for (m, _), eps in groups.items() if m == model for e in eps], order, level,
                           baseline, languages, n_resamples, seed, confidence)]
    finished = sum(1 for e in episodes if e.valid is not None)
    return LanguageReport(
        baseline=baseline, k=k, confidence=confidence, n_resamples=n_resamples, seed=seed,
        min_answer_letters=min_answer_letters, languages=tuple(languages), episodes=len(episodes),
        finished=finished, unfinished=len(episodes) - finished, summaries=tuple(summaries),
        against_baseline=tuple(gaps), answer_language=tuple(answers))


def _summary(sc: _VariantScores, model: str, vid: str, lang: str, level: str) -> LanguageConversationSummary:
    """One (model, variant, language) from its scores in the model's data restricted to the language."""
    failed, modes = _failure_modes(sc.episodes)
    return LanguageConversationSummary(
        model=model, variant_id=vid, level=level, language=lang, entries=sc.entries, episodes=sc.finished,
        unfinished=len(sc.episodes) - sc.finished, valid=sc.valid, accuracy=sc.accuracy,
        accuracy_ci=sc.accuracy_ci, pass_k_tau=sc.pass_k_tau, pass_k_ticket=sc.pass_k_ticket, failed=failed,
        failure_modes=modes)


def _gaps(model: str, episodes: Sequence[Result], order: Sequence[str], level: Mapping[str, str],
          baseline: str, languages: Sequence[str], n_resamples: int, seed: int,
          confidence: float) -> list[LanguageGap]:
    """Per (variant, language other than the baseline) of one model: the paired difference by template."""
    if baseline not in languages:
        return []
    correct: dict[tuple[str, str, str], int] = defaultdict(int)
    trials: dict[tuple[str, str, str], int] = defaultdict(int)
    for e in episodes:
        if e.valid is None:
            continue
        key = (e.variant_id, e.language, _template(e))
        trials[key] += 1
        correct[key] += 1 if e.valid else 0
    templates = sorted({t for _, _, t in trials})
    present = {(v, lang) for v, lang, _ in trials}
    columns = [(vid, lang) for vid in order for lang in languages
               if lang != baseline and (vid, lang) in present and (vid, baseline) in present]
    if not columns or not templates:
        return []
    shape = (len(templates), len(columns))
    base_rate, lang_rate, mask = np.zeros(shape), np.zeros(shape), np.zeros(shape, dtype=bool)
    for j, (vid, lang) in enumerate(columns):
        for t, template in enumerate(templates):
            nb, nl = trials.get((vid, baseline, template), 0), trials.get((vid, lang, template), 0)
            if nb and nl:
                mask[t, j] = True
                base_rate[t, j] = correct[(vid, baseline, template)] / nb
                lang_rate[t, j] = correct[(vid, lang, template)] / nl
    resampler = Resampler(len(templates), n_resamples, stats.seed_for(model, "templates", base=seed))
    diff = lang_rate - base_rate
    cis = _boot_means(resampler, diff, mask, confidence)
    return [LanguageGap(model, vid, level[vid], lang, baseline, int(mask[:, j].sum()),
                        _masked_mean(base_rate[:, j], mask[:, j]), _masked_mean(lang_rate[:, j], mask[:, j]),
                        _masked_mean(diff[:, j], mask[:, j]), cis[j])
            for j, (vid, lang) in enumerate(columns)]


def _answers(episodes: Sequence[Result], model: str, vid: str, level: str, lang: str,
             min_letters: int) -> AnswerLanguage:
    """The final answers of one (model, variant, language)'s finished episodes, judged for their language."""
    from promptgrid.languages import base_language
    from promptgrid.translate import detect_language

    texts = [text for e in episodes if e.valid is not None
             for text in (e.details.get("final_answers") or ()) if text is not None]
    judged = [text for text in texts if answer_judgeable(text, min_letters)]
    detected: Counter[str] = Counter()
    for text in judged:
        found, _ = detect_language(text, lang)
        detected[found or "unknown"] += 1
    want = base_language(lang)
    n_in = detected.get(want, 0)
    return AnswerLanguage(model, vid, level, lang, len(texts), len(texts) - len(judged), len(judged), n_in,
                          n_in / len(judged) if judged else math.nan,
                          tuple(sorted(detected.items(), key=lambda kv: (-kv[1], kv[0]))))
