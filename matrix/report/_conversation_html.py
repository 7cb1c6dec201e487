"""``conversations.html``: a conversation run's report as one self-contained page.

Inline CSS, figures as inline SVG, no script, nothing fetched: the page
opens from disk or an e-mail attachment. It shows, in order: per model, the
headline numbers; pass^k per variant (figure and the tables of
``ConversationReport``); accuracy by turn and where variants diverge;
the paired comparisons; failure modes; the native-vs-prompt gap; per
language (``LanguageReport``) when the run has several; then transcripts of
chosen episodes (``_transcript``): per turn the messages that opened it,
each step's answer, its decoded calls with their results, and the turn's
verdict (valid, or the failure mode with its state differences, missing and
extra calls).

The tables are the Markdown report's own (``ConversationReport.sections``,
``LanguageReport.sections``), shown with the single-turn page's template
macros (``promptgrid.matrix.report._html``); the figures are drawn with its
figure helpers (``_figures``). The page is rendered from
``templates/conversations.html.j2`` with autoescape on: everything a model
wrote (answers, calls, arguments, results, decoding errors, state values) is
HTML-escaped, control characters are written as visible escapes
(``render_page``), and long texts are cut (``MAX_SHOWN_CHARS``).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from promptgrid.errors import ReportError
from promptgrid.matrix.report._format import ci_pct, pct, pp
from promptgrid.matrix.report._html import _stat, render_page, table_view
from promptgrid.matrix.report._transcripts import (
    MAX_TRANSCRIPTS,
    EpisodeTranscript,
    TranscriptStep,
    TranscriptTurn,
)

from ._conversation_languages import LanguageReport
from ._conversations import ConversationReport, ReportSection, _describe, _fraction_ci, episode_failure_mode

if TYPE_CHECKING:  # matplotlib only where figures are drawn
    from promptgrid.matrix.report._figures import Rendered
    from promptgrid.matrix.running.results import Result

__all__ = ["MAX_SHOWN_CHARS", "conversation_html", "conversation_run_html"]

MAX_SHOWN_CHARS = 20_000
"""Most characters of one message, answer or result the transcripts show (the rest is counted, not shown)."""
_MAX_VALUE_CHARS = 2_000  # of one value in a state difference


def _clip(text: Any, limit: int = MAX_SHOWN_CHARS) -> str:
    text = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False, default=str)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n… ({len(text) - limit:,} more characters not shown)"


_UNSAFE_SVG = re.compile(r"<\s*(script|foreignobject|iframe|object|embed)\b", re.IGNORECASE)


def _inline_svg(fig: Rendered) -> Markup:
    """A figure's SVG for inlining in the page: the XML prolog and doctype dropped, labelled for screen readers.
    matplotlib escapes every text it writes; a figure that still holds an active element is refused."""
    svg = fig.svg[fig.svg.index("<svg"):]
    if _UNSAFE_SVG.search(svg):
        raise ReportError(f"the figure {fig.name!r} holds markup that is not a drawing; it was not written.")
    title = Markup.escape(fig.title)
    return Markup(svg.replace("<svg ", f'<svg role="img" aria-label="{title}" ', 1))


def _figure(fig: Rendered | None) -> dict[str, Any]:
    if fig is None:
        return {"kind": "figure", "figure": None}
    return {"kind": "figure", "figure": {"name": fig.name, "title": fig.title, "caption": fig.caption,
                                         "svg": _inline_svg(fig)}}


def _section(s: ReportSection) -> dict[str, Any]:
    return {"kind": "section", "section": {
        "key": s.key, "title": s.title, "table": None if s.table is None else table_view(s.table),
        "empty": s.empty, "note": s.note, "glossary": list(s.glossary)}}


def _cards(report: ConversationReport) -> dict[str, Any]:
    cards = []
    k = report.k
    for m in report.models:
        stats = [
            _stat("Accuracy", f"{pct(m.accuracy)}%", ci_pct(m.accuracy_ci), f"{m.episodes:,} finished episodes"),
            _stat(f"pass^{k} tau-bench", _fraction_ci(m.pass_k_tau.value, (math.nan, math.nan)),
                  _bracket(m.pass_k_tau.ci), "C(c,k)/C(n,k)"),
            _stat(f"pass^{k} Ticket-Bench", _fraction_ci(m.pass_k_ticket.value, (math.nan, math.nan)),
                  _bracket(m.pass_k_ticket.ci), "(c/n)^k"),
        ]
        gap = next((g for g in report.native_gap if g.model == m.model and g.overall is not None), None)
        if gap is not None and gap.overall is not None:
            stats.append(_stat("Native − prompt", f"{pp(gap.overall.diff)} pp", _signed(gap.overall.diff_ci),
                               f"on {gap.overall.entries:,} conversations"))
        scored = [v for v in report.variants if v.model == m.model and v.episodes]
        if len(scored) > 1:
            top = max(scored, key=lambda v: v.accuracy)
            bottom = min(scored, key=lambda v: v.accuracy)
            if top.accuracy == bottom.accuracy:
                stats.append(_stat("All variants tie", f"{pct(top.accuracy)}%", "", f"{len(scored)} variants"))
            else:
                stats += [_stat("Best variant", f"{pct(top.accuracy)}%", ci_pct(top.accuracy_ci),
                                label=report.labels.get(top.variant_id, top.variant_id), wide=True),
                          _stat("Worst variant", f"{pct(bottom.accuracy)}%", ci_pct(bottom.accuracy_ci),
                                label=report.labels.get(bottom.variant_id, bottom.variant_id), wide=True)]
        cards.append({"model": m.model, "stats": stats, "points": []})
    return {"kind": "cards", "cards": cards, "notes": []}


def _bracket(ci: tuple[float, float]) -> str:
    return "" if math.isnan(ci[0]) or math.isnan(ci[1]) else f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def _signed(ci: tuple[float, float]) -> str:
    return "" if math.isnan(ci[0]) or math.isnan(ci[1]) else f"[{pp(ci[0])}, {pp(ci[1])}]"


# ------------------------------------------------------------------------------------------- transcripts


def _status(valid: bool | None, mode: str | None) -> tuple[str, str]:
    """(text, css class) of a verdict."""
    if valid is None:
        return "unfinished", "unfinished"
    return ("valid", "ok") if valid else (f"failed: {mode or 'unknown'}", "bad")


def _message(message: Mapping[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    text = "" if content is None else content if isinstance(content, str) else json.dumps(
        content, ensure_ascii=False, default=str)
    return {"role": str(message.get("role", "")), "content": _clip(text), "size": f"{len(text):,} characters"}


def _step(step: TranscriptStep) -> dict[str, Any]:
    return {"index": step.index, "answer": _clip(step.answer), "ends": step.ends_turn,
            "tool_calls": [_clip(c) for c in step.tool_calls], "decode_error": step.decode_error,
            "latency": "" if step.latency_s is None else f"{step.latency_s:.2f} s",
            "calls": [{"call": _clip(c.call), "output": _clip(c.output), "refused": c.refused} for c in step.calls]}


def _checks(verdict: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """What a turn's stored verdict says beyond valid/failed, as titled lists and a table of state differences."""
    details = (verdict or {}).get("details") or {}
    if not isinstance(details, Mapping):
        return []
    checks: list[dict[str, Any]] = []
    diffs = details.get("state_differences")
    if isinstance(diffs, Mapping) and diffs:
        rows = [(str(cls), str(d.get("path", name)), _clip(d.get("model"), _MAX_VALUE_CHARS),
                 _clip(d.get("ground_truth"), _MAX_VALUE_CHARS))
                for cls, attributes in diffs.items() if isinstance(attributes, Mapping)
                for name, found in attributes.items() if isinstance(found, list)
                for d in found if isinstance(d, Mapping)]
        checks.append({"title": "State differences (model's environment against the ground truth's)",
                       "rows": rows, "entries": []})
    for key, title in (("missing_calls", "Expected calls not made"), ("extra_calls", "Calls beyond the expected"),
                       ("missing_results", "Expected results not obtained")):
        found = details.get(key)
        if isinstance(found, list) and found:
            checks.append({"title": title, "rows": [], "entries": [_clip(x, _MAX_VALUE_CHARS) for x in found]})
    refused = details.get("refused")
    if isinstance(refused, list) and refused:
        checks.append({"title": "Refused calls", "rows": [], "entries": [
            f"{_clip(r.get('call'), _MAX_VALUE_CHARS)}: {r.get('reason')}" for r in refused if isinstance(r, Mapping)]})
    failures = details.get("decode_failures")
    if isinstance(failures, list) and failures:
        checks.append({"title": "Answers that could not be decoded", "rows": [], "entries": [
            f"step {f.get('step')}: {_clip(f.get('error'), _MAX_VALUE_CHARS)}" for f in failures
            if isinstance(f, Mapping)]})
    other = details.get("argument_rule_disagrees")
    if isinstance(other, Mapping):
        verdict_text = "valid" if other.get("valid") else f"failed ({other.get('failure_mode')})"
        checks.append({"title": "The other argument rule", "rows": [], "entries": [
            f"the {other.get('other_rule')} rule scores this turn {verdict_text}"]})
    return checks


def _turn(turn: TranscriptTurn) -> dict[str, Any]:
    verdict = turn.verdict or {}
    valid = verdict.get("valid") if isinstance(verdict.get("valid"), bool) else None
    mode = verdict.get("failure_mode")
    text, cls = _status(valid, mode) if turn.verdict is not None else ("no verdict", "unfinished")
    return {"index": turn.index, "status": text, "status_class": cls, "reached": turn.reached,
            "description": _describe(mode) if isinstance(mode, str) else "",
            "messages": [_message(m) for m in turn.messages], "steps": [_step(s) for s in turn.steps],
            "checks": _checks(turn.verdict)}


def _facts(e: Result) -> str:
    cost = "cost unknown" if e.cost_usd is None else f"${e.cost_usd:.4f}"
    return (f"{e.category}, language {e.language}; {e.steps:,} steps ({e.sent:,} sent in the last run), "
            f"{e.input_tokens:,} tokens in, {e.output_tokens:,} out, {cost}, {e.latency_s:.1f} s")


def _transcript(number: int, t: EpisodeTranscript) -> dict[str, Any]:
    e = t.episode
    text, cls = (("unsupported", "unfinished") if e.status == "unsupported"
                 else _status(e.valid, episode_failure_mode(e)))
    problems = []
    if e.error:
        problems.append(f"Error: {_clip(e.error, _MAX_VALUE_CHARS)}")
    failure = e.details.get("environment_failure")
    if isinstance(failure, Mapping):
        problems.append(f"Environment failure: {_clip(failure.get('detail'), _MAX_VALUE_CHARS)}")
    if t.note:
        problems.append(f"Transcript: {t.note}")
    return {"id": f"episode-{number}", "status": text, "status_class": cls, "model": e.model, "label": t.label,
            "conversation": e.conversation_id, "repeat": e.repeat, "facts": _facts(e), "problems": problems,
            "turns": [_turn(turn) for turn in t.turns]}


# ------------------------------------------------------------------------------------------------ the page


def conversation_html(report: ConversationReport, *, languages: LanguageReport | None = None,
                      transcripts: Sequence[EpisodeTranscript] = (), figures: Sequence[Rendered] | None = None,
                      about: Mapping[str, Any] | None = None, title: str = "Conversation report",
                      omitted: int = 0) -> str:
    """The report as one self-contained HTML page (module docstring).

    ``languages``: the per-language report, shown when given (``promptgrid report`` gives it when the run has
    several languages). ``transcripts``: the episodes to show step by step (``_transcript.episode_transcripts``).
    ``figures``: drawn from the reports when ``None`` (``_figures.conversation_figures``; matplotlib).
    ``about``: what the header says the run is (``dataset``, ``grid``, ``models``, ``run``), values as text.
    ``omitted``: how many more episodes were chosen than ``transcripts`` holds (the page says so).
    """
    if figures is None:
        from ._conversation_figures import conversation_figures

        figures = conversation_figures(report, languages)
    figs = {f.name: f for f in figures}
    by_key = {s.key: s for s in report.sections()}
    sections: list[dict[str, Any]] = []

    def section(sid: str, heading: str, *parts: dict[str, Any]) -> None:
        sections.append({"id": sid, "title": heading, "parts": list(parts)})

    section("summary", "Summary", _cards(report))
    section("pass-k", "Accuracy and pass^k", _figure(figs.get("pass_k")), _section(by_key["conv-variants"]),
            _section(by_key["conv-models"]))
    section("turns", "Turns", _figure(figs.get("turns")), _section(by_key["conv-turns"]),
            _section(by_key["conv-divergence"]))
    section("comparisons", "Paired comparisons", _section(by_key["conv-comparisons"]))
    section("failures", "Failure modes", _section(by_key["conv-failures"]))
    section("native", "Native vs prompt", _figure(figs.get("native_gap")), _section(by_key["conv-native"]))
    if languages is not None:
        section("languages", "Languages", {"kind": "text", "text": languages.overview()},
                _figure(figs.get("languages")), *(_section(s) for s in languages.sections()))
    shown = [_transcript(i, t) for i, t in enumerate(transcripts, 1)]
    section("transcripts", "Transcripts", {"kind": "transcripts", "transcripts": shown, "omitted": omitted})
    facts = [f"{key}: {value}" for key, value in (about or {}).items() if value not in (None, "", [], ())]
    return render_page("conversations.html.j2", title=title, overview=report.overview(), about=" · ".join(facts),
                       sections=sections, confidence=f"{100 * report.confidence:g}")


def conversation_run_html(
    run_dir: str | os.PathLike[str],
    *,
    transcripts: Sequence[str] | None = None,
    max_transcripts: int = MAX_TRANSCRIPTS,
    model_params: Mapping[str, Mapping[str, Any]] | None = None,
    report: ConversationReport | None = None,
    languages: LanguageReport | None = None,
    results: Sequence[Result] | None = None,
    k: int | None = None,
    confidence: float = 0.95,
) -> str:
    """The HTML report of the conversation run in ``run_dir``: ``conversation_html`` of its report, its
    per-language report when it has several languages, and the transcripts of chosen episodes.

    ``transcripts``: conversation ids (``ID`` or ``ID#REPEAT``) whose episodes to show; default: per (model,
    variant) the first failed and the first valid episode (``_transcript.choose_episodes``); at most
    ``max_transcripts`` (0: none). ``model_params``: per model, the generation parameters the run was given
    when they are not ``promptgrid run``'s defaults (a step's stored answer is found by them).
    ``report``/``languages``/``results``: already computed or read (``promptgrid report`` reads the run once);
    otherwise made here with ``k`` and ``confidence``. Raises ``RunError``/``StoreError`` for a directory
    without a readable conversation store, ``ReportError`` for a transcript id the run does not have.
    """
    from promptgrid.matrix.report._transcripts import choose_episodes, episode_transcripts
    from promptgrid.matrix.running.conversation_reader import ConversationReader

    run = ConversationReader(run_dir)
    variants = run.variants()
    episodes = list(results) if results is not None else run.episodes()
    labels = run.labels()
    if report is None:
        from ._conversations import conversation_report

        try:
            report = conversation_report(episodes, variants, k=k, confidence=confidence, labels=labels)
        except ValueError as exc:
            raise ReportError(str(exc)) from None
    if languages is None and len({e.language for e in episodes}) > 1:
        from ._conversation_languages import language_report

        try:
            languages = language_report(episodes, variants, k=k, confidence=confidence)
        except ValueError as exc:
            raise ReportError(str(exc)) from None
    if max_transcripts < 0:
        raise ReportError(f"the number of transcripts must be 0 or more, not {max_transcripts}.")
    chosen = choose_episodes(episodes, transcripts, limit=len(episodes), order=list(variants))
    shown = episode_transcripts(run_dir, chosen[:max_transcripts], model_params=model_params, labels=labels)
    meta = run.meta()
    models = meta.get("models")
    about = {"run": str(run_dir), "dataset": meta.get("dataset"), "grid": meta.get("grid"),
             "models": ", ".join(str(m) for m in models) if isinstance(models, list) else None}
    return conversation_html(report, languages=languages, transcripts=shown, about=about,
                             omitted=len(chosen) - len(shown))
