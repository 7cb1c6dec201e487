"""The per-language report of conversation runs (``promptgrid.matrix.report._conversation_languages``) and the
``massive_conversations`` grid.

Synthetic ``Result`` records with hand-computed expectations (pairing by template, both pass^k per
language, the difference against English and its interval, unfinished episodes left out, the language of
final answers); then an end-to-end run of ``fake/ground-truth`` and ``fake/prose`` on three ``mini-mt``
templates in English, German and Japanese at the translation levels of the grid, and its ``promptgrid
report``. The description levels need the ``mini-mt`` description catalogs
(``translate/catalogs/descriptions/mini-mt/<lang>.yaml``): without them their test is skipped, saying so.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from promptgrid.errors import MissingTranslationError
from promptgrid.matrix.report import stats
from promptgrid.matrix.report._conversation_languages import (
    MIN_ANSWER_LETTERS,
    answer_judgeable,
    language_report,
    translation_level,
)
from promptgrid.matrix.report._conversations import TAU_BENCH_PASS_K, TICKET_BENCH_PASS_K
from promptgrid.matrix.running.results import Result
from support.episodes import run_conversations

V = "v"
VARIANTS: dict[str, dict[str, str]] = {V: {}}


def _ep(template: str, lang: str, repeat: int, valid: bool | None, *, model: str = "m", variant: str = V,
        mode: str | None = None, answers: list[str | None] | None = None) -> Result:
    return Result.episode(model=model, variant_id=variant, conversation_id=f"{template}_{lang}", category="c",
                          repeat=repeat, valid=valid, failure_mode=mode if valid is False else None, language=lang,
                          template=template, details={"final_answers": answers or []})


# en: t1 2/2, t2 1/2, t3 2/2, t5 2/2 (no German t5); de: t1 1/2, t2 1/2, t3 0/2, t4 2/2 (no English t4),
# and an unfinished third repeat of de t1 (never scored).
OUTCOMES = {("t1", "en"): (True, True), ("t2", "en"): (True, False), ("t3", "en"): (True, True),
            ("t5", "en"): (True, True), ("t1", "de"): (True, False), ("t2", "de"): (False, True),
            ("t3", "de"): (False, False), ("t4", "de"): (True, True)}


def _episodes(model: str = "m") -> list[Result]:
    eps = [_ep(t, lang, r, ok, model=model, mode="wrong_end_state" if (t, r) != ("t3", 1) else "decode_failure")
           for (t, lang), outcomes in OUTCOMES.items() for r, ok in enumerate(outcomes)]
    return [*eps, _ep("t1", "de", 2, None, model=model)]


def test_accuracy_and_both_pass_k_per_language_unfinished_left_out() -> None:
    report = language_report(_episodes(), VARIANTS)
    assert report.k == 2 and report.languages == ("en", "de") and report.baseline == "en"
    assert (report.episodes, report.finished, report.unfinished) == (17, 16, 1)
    en, de = report.summaries
    assert (en.language, en.entries, en.episodes, en.unfinished, en.valid) == ("en", 4, 8, 0, 7)
    assert (de.language, de.entries, de.episodes, de.unfinished, de.valid) == ("de", 4, 8, 1, 4)
    assert en.accuracy == 7 / 8 and en.accuracy_ci == stats.wilson_interval(7, 8)
    assert de.accuracy == 4 / 8 and de.accuracy_ci == stats.wilson_interval(4, 8)
    # tau-bench C(c,2)/C(2,2): en 1, 0, 1, 1; de 0, 0, 0, 1. Ticket-Bench (c/2)^2: en 1, 1/4, 1, 1; de 1/4, 1/4, 0, 1
    assert en.pass_k_tau.name == TAU_BENCH_PASS_K and en.pass_k_ticket.name == TICKET_BENCH_PASS_K
    assert en.pass_k_tau.value == pytest.approx(0.75) and en.pass_k_ticket.value == pytest.approx(3.25 / 4)
    assert de.pass_k_tau.value == pytest.approx(0.25) and de.pass_k_ticket.value == pytest.approx(1.5 / 4)
    assert de.pass_k_tau.entries == de.pass_k_ticket.entries == 4
    for p in (en.pass_k_tau, en.pass_k_ticket, de.pass_k_tau, de.pass_k_ticket):
        assert p.k == 2 and p.ci[0] <= p.value <= p.ci[1]
    # failure modes of the failed episodes (unfinished ones are not failures)
    assert (en.failed, [(m.mode, m.count) for m in en.failure_modes]) == (1, [("wrong_end_state", 1)])
    assert de.failed == 4
    assert [(m.mode, m.count, m.share) for m in de.failure_modes] == [("wrong_end_state", 3, 0.75),
                                                                      ("decode_failure", 1, 0.25)]
    one = language_report(_episodes(), VARIANTS, k=1)
    assert one.summaries[1].pass_k_tau.value == one.summaries[1].pass_k_ticket.value == pytest.approx(0.5)
    with pytest.raises(ValueError, match="k=3 is larger"):
        language_report(_episodes(), VARIANTS, k=3)
    with pytest.raises(ValueError, match="not in variants"):
        language_report(_episodes(), {"other": {}})


def test_points_against_english_are_paired_by_template() -> None:
    report = language_report(_episodes(), VARIANTS)
    (gap,) = report.against_baseline
    # only t1, t2, t3 are in both languages: de - en = (1/2 - 1) + (1/2 - 1/2) + (0 - 1) over 3
    assert (gap.language, gap.baseline, gap.templates) == ("de", "en", 3)
    assert gap.baseline_rate == pytest.approx(2.5 / 3) and gap.language_rate == pytest.approx(1 / 3)
    assert gap.diff == pytest.approx(-0.5)
    assert -1.0 <= gap.diff_ci[0] <= -0.5 <= gap.diff_ci[1] <= 0.0 and gap.diff_ci[0] < gap.diff_ci[1]
    # deterministic, and a second model leaves the first one's numbers as they were
    again = language_report(_episodes() + _episodes("other"), VARIANTS)
    assert again.against_baseline[0] == gap and again.summaries[0] == report.summaries[0]
    assert [g.model for g in again.against_baseline] == ["m", "other"]
    # a baseline the run lacks: no comparison; another baseline: compared the other way round
    assert language_report(_episodes(), VARIANTS, baseline="fr").against_baseline == ()
    (back,) = language_report(_episodes(), VARIANTS, baseline="de").against_baseline
    assert back.language == "en" and back.diff == pytest.approx(0.5)


def test_points_against_english_per_variant_and_the_truth_inside_the_interval() -> None:
    variants = {"english": {}, "full": {"instruction_language": "query", "description_language": "query"}}
    eps = []
    for n in range(30):  # full loses exactly one template in three in German, english none
        eps += [_ep(f"t{n}", "en", 0, True, variant=vid) for vid in variants]
        eps += [_ep(f"t{n}", "de", 0, True, variant="english"), _ep(f"t{n}", "de", 0, n % 3 != 0, variant="full")]
    report = language_report(eps, variants)
    english, full = report.against_baseline
    assert (english.level, english.diff, english.diff_ci) == ("english", 0.0, (0.0, 0.0))
    assert full.level == "full" and full.templates == 30 and full.diff == pytest.approx(-1 / 3)
    assert full.diff_ci[0] < -1 / 3 < full.diff_ci[1] < 0
    assert "| full" in report.to_markdown() and "full: en 100.0; de 66.7 (-33.3" in report.console()


def test_translation_levels_and_what_answers_are_judged() -> None:
    assert translation_level({}) == "english"
    assert translation_level({"description_language": "query"}) == "partial-descriptions"
    assert translation_level({"instruction_language": "query"}) == "partial-instructions"
    assert translation_level({"instruction_language": "query", "description_language": "query"}) == "full"
    assert translation_level({"instruction_language": "de"}) == "instructions=de descriptions=en"
    assert MIN_ANSWER_LETTERS == 20
    assert answer_judgeable("I have booked the flight to Boston for you.")
    assert not answer_judgeable(None) and not answer_judgeable("Done, thanks.")  # 10 letters
    assert not answer_judgeable('[book_flight(city="Boston", date="tomorrow morning")]')
    assert not answer_judgeable('{"function": "book_flight", "parameters": {"city": "Boston and more"}}')
    assert not answer_judgeable('```json\n[{"function": "book_flight", "parameters": {}}]\n```')
    assert not answer_judgeable("<functions><function name='book_flight'></function></functions>")


def test_final_answers_in_the_users_language() -> None:
    de_answers: list[str | None] = [
        "Ich habe den Flug nach Berlin für Sie gebucht.",   # German
        "I have booked the hotel room for you, thank you.",  # English in a German conversation
        "[book_flight(city='Berlin')]",                      # a call list: not judged
        "Ja, gerne.",                                        # too short: not judged
        None,                                                # no answer ended the turn: not counted
    ]
    eps = [_ep("t1", "en", 0, True, answers=["I have booked the flight to Boston for you."]),
           _ep("t1", "de", 0, False, mode="wrong_end_state", answers=de_answers),
           _ep("t1", "ja", 0, True, answers=["フライトを予約しました。ご利用ありがとうございます。"]),
           _ep("t2", "de", 0, None, answers=["Das ist ein ganz und gar deutscher Satz, nicht gewertet."])]
    report = language_report(eps, VARIANTS)
    by_lang = {a.language: a for a in report.answer_language}
    en, de, ja = by_lang["en"], by_lang["de"], by_lang["ja"]
    assert (en.answers, en.skipped, en.judged, en.in_language, en.share) == (1, 0, 1, 1, 1.0)
    assert (de.answers, de.skipped, de.judged, de.in_language, de.share) == (4, 2, 2, 1, 0.5)
    assert dict(de.detected) == {"de": 1, "en": 1}
    assert (ja.judged, ja.in_language, ja.detected) == (1, 1, (("ja", 1),))
    data = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert data["answer_language"][1]["detected"] == [{"language": "de", "count": 1}, {"language": "en", "count": 1}]
    assert data["languages"] == ["en", "de", "ja"] and data["min_answer_letters"] == MIN_ANSWER_LETTERS
    assert set(data["pass_k_names"].values()) == {TAU_BENCH_PASS_K, TICKET_BENCH_PASS_K}
    assert "Final answers in the user's language" in report.to_markdown()
    none = language_report([_ep("t1", "de", 0, True)], VARIANTS)
    assert none.answer_language[0].judged == 0 and math.isnan(none.answer_language[0].share)
    assert none.to_dict()["answer_language"][0]["share"] is None


# ----------------------------------------------------------------------------------------- end to end

LANGS = ("en", "de", "ja")
TEMPLATES = ("mini_mt_1", "mini_mt_2", "mini_mt_3")
DESCRIPTION_LEVELS = ("partial-descriptions", "full")


@pytest.fixture(scope="module")
def e2e(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One run of the ground truth and the prose fake at every level that renders (module docstring)."""
    pytest.importorskip("bfcl_eval.eval_checker.multi_turn_eval.func_source_code.travel_booking")
    from promptgrid.matrix.conversations import load_conversations
    from promptgrid.matrix.episodes._first_turn import first_turn_case
    from promptgrid.matrix.running.session import make_renderer
    from promptgrid.variants import load_grid

    tmp = tmp_path_factory.mktemp("languages")
    mp = pytest.MonkeyPatch()
    mp.setenv("XDG_CACHE_HOME", str(tmp / "cache"))  # no translation store: catalogs only
    try:
        conversations = [c for c in load_conversations("mini-mt:" + ",".join(LANGS)) if c.template in TEMPLATES]
        assert len(conversations) == len(TEMPLATES) * len(LANGS)
        grid = load_grid("massive_conversations")
        by_label = {v.label: v for v in grid.variants}
        assert list(by_label) == ["english", "partial-descriptions", "partial-instructions", "full"]
        renderer = make_renderer(grid.variants)
        levels, missing = [], ""
        for label, variant in by_label.items():
            try:
                prompts = {c.language: str(renderer.render(variant, first_turn_case(c)).messages)
                           for c in conversations if c.template == TEMPLATES[0]}
            except MissingTranslationError as exc:
                missing = missing or str(exc).splitlines()[0]
                continue
            if label != "english":  # the translated level sends another prompt, except in English
                assert prompts["de"] != str(renderer.render(by_label["english"], first_turn_case(
                    next(c for c in conversations if c.language == "de"))).messages)
            levels.append(variant)
        run_dir = tmp / "run"
        truth = run_conversations(levels, conversations, models=["fake/ground-truth", "fake/prose"],
                                  run_dir=run_dir, renderer=renderer)
        return {"levels": levels, "missing": missing, "summary": truth, "run_dir": run_dir}
    finally:
        mp.undo()


def _per_level_language(summary: Any, model: str) -> dict[tuple[str, str], list[bool]]:
    out: dict[tuple[str, str], list[bool]] = {}
    for r in summary.results:
        if r.model == model:
            out.setdefault((r.variant_id, r.language), []).append(r.valid)
    return out


def test_ground_truth_everywhere_prose_nowhere_and_no_points_lost_against_english(e2e: dict[str, Any]) -> None:
    from promptgrid.matrix.api import open_conversation_run

    levels = e2e["levels"]
    labels = [v.label for v in levels]
    assert {"english", "partial-instructions"} <= set(labels)
    summary = e2e["summary"]
    assert summary.errors == 0
    truth = _per_level_language(summary, "fake/ground-truth")
    assert set(truth) == {(v.id, lang) for v in levels for lang in LANGS}
    assert all(outcomes == [True] * len(TEMPLATES) for outcomes in truth.values()), truth
    prose = _per_level_language(summary, "fake/prose")
    assert all(outcomes == [False] * len(TEMPLATES) for outcomes in prose.values()), prose

    report = open_conversation_run(e2e["run_dir"]).language_report()
    assert report.languages == LANGS and report.unfinished == 0
    level_of = {v.id: v.label for v in levels}
    assert {s.level for s in report.summaries} == set(labels)
    assert all(s.level == level_of[s.variant_id] for s in report.summaries)
    for s in report.summaries:
        expected = 1.0 if s.model == "fake/ground-truth" else 0.0
        assert (s.accuracy, s.pass_k_tau.value, s.pass_k_ticket.value, s.entries) == (expected, expected,
                                                                                      expected, len(TEMPLATES))
    gaps = [g for g in report.against_baseline if g.model == "fake/ground-truth"]
    assert {(g.variant_id, g.language) for g in gaps} == {(v.id, lang) for v in levels for lang in LANGS[1:]}
    assert all((g.diff, g.diff_ci, g.templates) == (0.0, (0.0, 0.0), len(TEMPLATES)) for g in gaps)
    # the ground truth fake ends every turn in English ("I have done what you asked.")
    shares = {(a.variant_id, a.language): a.share for a in report.answer_language if a.model == "fake/ground-truth"}
    assert all(shares[(v.id, "en")] == 1.0 and shares[(v.id, "de")] == 0.0 for v in levels)


def test_description_levels_run_when_the_catalogs_exist(e2e: dict[str, Any]) -> None:
    labels = {v.label for v in e2e["levels"]}
    if not set(DESCRIPTION_LEVELS) <= labels:
        pytest.skip("the mini-mt description catalogs (translate/catalogs/descriptions/mini-mt/<lang>.yaml) are "
                    f"not there yet, so description_language: query cannot render: {e2e['missing']}")
    summary = e2e["summary"]
    ids = {v.id for v in e2e["levels"] if v.label in DESCRIPTION_LEVELS}
    done = [r for r in summary.results if r.model == "fake/ground-truth" and r.variant_id in ids]
    assert len(done) == len(ids) * len(TEMPLATES) * len(LANGS) and all(r.valid for r in done)


def test_report_cli_adds_the_language_section(e2e: dict[str, Any], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from promptgrid.matrix.cli import main

    assert main(["report", str(e2e["run_dir"]), "--format", "json", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "conversation report:" in printed and "per language (en, de, ja; baseline en)" in printed
    data = json.loads((tmp_path / "conversations.json").read_text(encoding="utf-8"))
    assert data["languages"]["languages"] == list(LANGS) and data["languages"]["baseline"] == "en"
    assert data["models"] and data["languages"]["against_baseline"]
    assert main(["report", str(e2e["run_dir"]), "--format", "md", "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    markdown = (tmp_path / "conversations.md").read_text(encoding="utf-8")
    assert "## Conversation runs" in markdown and "## Conversations per language" in markdown


def test_native_tools_carry_the_translated_descriptions_the_prompt_has() -> None:
    from promptgrid.matrix.calling import call_request
    from promptgrid.matrix.conversations import load_conversations
    from promptgrid.matrix.episodes._first_turn import first_turn_case
    from promptgrid.matrix.episodes._steps import Transcript
    from promptgrid.matrix.running.session import make_renderer
    from promptgrid.variants import Variant

    german = next(c for c in load_conversations("mini-mt:de"))
    english = next(c for c in load_conversations("mini-mt:en") if c.template == german.template)
    for mode in ("native", "constrained"):
        variant = Variant(call_mode=mode, description_language="query")
        renderer = make_renderer([variant])
        transcript = Transcript(german, variant, renderer)
        transcript.open_turn(0)
        localized = renderer.functions(variant, first_turn_case(german))
        assert transcript.functions == tuple(localized) != tuple(german.functions_at(0))
        assert transcript.request == call_request(variant, localized, min_calls=0)
        in_english = Transcript(english, variant, renderer)
        in_english.open_turn(0)
        assert in_english.functions == tuple(english.functions_at(0))  # English: the docs as they are
        if mode == "native":  # the tools' descriptions (a python grammar has none)
            assert json.dumps(transcript.request) != json.dumps(in_english.request)
