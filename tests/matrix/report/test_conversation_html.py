"""conversations.html: figures, the Markdown report's tables, transcripts rebuilt from the store, escaping, the CLI.

Runs are made offline with the scripted fakes (``fake/ground-truth``, ``fake/noisy``) on BFCL's
``multi_turn_base`` (through the CLI, so the store names its dataset and grid and the steps are keyed with the
CLI's default generation parameters) and with a test client whose answers and call arguments are HTML.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from promptgrid.errors import ReportError
from promptgrid.matrix.api import open_conversation_run
from promptgrid.matrix.cli import main
from promptgrid.matrix.conversations import (
    TAU_BENCH_PASS_K,
    Result,
    choose_episodes,
    conversation_html,
    conversation_report,
    conversation_run_html,
    episode_transcripts,
    load_conversations,
)
from promptgrid.variants import Variant
from support.episodes import CallThenProse, made_turn, run_conversations

GT, NOISY = "fake/ground-truth", "fake/noisy"
HOSTILE = "<script>alert(1)</script>"
HOSTILE_ARGUMENT = "</pre><script>alert(2)</script>"
HOSTILE_MODEL = "test/html"
HTML_ANSWERS = CallThenProse(HOSTILE_MODEL, f"[cd(folder={HOSTILE_ARGUMENT!r})]",
                             f"{HOSTILE}<img src=x onerror=alert(3)>")
"""Answers in HTML: a call with an HTML argument, then HTML prose."""


def ep(model: str, vid: str, conv: str, repeat: int, valid: bool | None) -> Result:
    return Result.episode(model=model, variant_id=vid, conversation_id=conv, category="multi_turn_base",
                          repeat=repeat, valid=valid, failure_mode=None if valid or valid is None else "missing_call",
                          turns=() if valid is None else (made_turn(0, bool(valid),
                                                                    None if valid else "missing_call"),),
                          error="stopped" if valid is None else None)


# ------------------------------------------------------------------------------ choosing episodes (no bfcl)


def test_choose_episodes_first_failed_then_first_valid_per_variant_across_models() -> None:
    eps = [ep("m", "b", "c1", 0, True), ep("m", "a", "c1", 0, True), ep("m", "a", "c2", 0, False),
           ep("m", "a", "c3", 0, False), ep("n", "a", "c1", 0, None), ep("n", "a", "c2", 0, False),
           ep("n", "b", "c1", 0, True)]
    chosen = choose_episodes(eps, order=["a", "b"])
    # Round 1: each model's first variant (a): m's failed c2 then valid c1; n's failed c2 (its c1 is unfinished).
    # Round 2: each model's second variant (b): m's valid c1, n's valid c1.
    assert [(e.model, e.variant_id, e.conversation_id) for e in chosen] == [
        ("m", "a", "c2"), ("m", "a", "c1"), ("n", "a", "c2"), ("m", "b", "c1"), ("n", "b", "c1")]
    assert [e.conversation_id for e in choose_episodes(eps, order=["a", "b"], limit=2)] == ["c2", "c1"]
    assert choose_episodes(eps, limit=0) == []
    with pytest.raises(ReportError, match="0 or more"):
        choose_episodes(eps, limit=-1)


def test_choose_episodes_by_conversation_id_and_repeat() -> None:
    eps = [ep("m", "a", "c1", 0, True), ep("m", "a", "c1", 1, False), ep("m", "b", "c1", 0, True),
           ep("m", "a", "c2", 0, True), ep("m", "a", "odd#1", 0, True)]
    assert [(e.variant_id, e.repeat) for e in choose_episodes(eps, ["c1"], order=["a", "b"])] == [
        ("a", 0), ("a", 1), ("b", 0)]
    assert [(e.variant_id, e.repeat) for e in choose_episodes(eps, ["c1#1", "c1#1"])] == [("a", 1)]
    assert [e.conversation_id for e in choose_episodes(eps, ["odd#1"])] == ["odd#1"]  # an id with '#' is whole
    with pytest.raises(ReportError, match="Did you mean 'c1'"):
        choose_episodes(eps, ["c11"])
    with pytest.raises(ReportError, match="with repeat 5"):
        choose_episodes(eps, ["c1#5"])
    with pytest.raises(ReportError, match="whole number"):
        choose_episodes(eps, ["c1#x"])


# ------------------------------------------------------------------------------ the page of a report (no bfcl)


def _synthetic_report(model: str = "m") -> Any:
    eps = []
    for vid in ("p", "n"):
        for c in range(3):
            for r in range(2):
                valid = (c + r + (vid == "n")) % 3 != 0
                eps.append(Result.episode(model=model, variant_id=vid, conversation_id=f"c{c}",
                                          category="multi_turn_base", repeat=r, valid=valid,
                                          failure_mode=None if valid else "wrong_end_state",
                                          turns=(made_turn(0, True), made_turn(1, valid))))
    variants = {"p": {"call_mode": "prompt", "return_format": "python"}, "n": {"call_mode": "native"}}
    return conversation_report(eps, variants, n_resamples=100, labels={"p": "json->python,False", "n": "native"})


def test_page_of_a_report_has_its_figures_and_every_table_of_the_markdown() -> None:
    report = _synthetic_report()
    html = conversation_html(report)
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    for name in ("pass_k", "turns", "native_gap"):
        assert f'<figure class="svg" id="figure-{name}"><svg role="img"' in html
    assert "figure-languages" not in html  # one language: no language figure or section
    for section in report.sections():
        assert f'id="{section.key}"' in html
        if section.table is not None:
            assert html.count(f'id="{section.key}"') == 1
    assert TAU_BENCH_PASS_K in html and "json-&gt;python,False" in html
    assert "No episode chosen." in html
    assert "<script" not in html.lower() and "<img" not in html
    # Self-contained: no attribute points anywhere but inside the page (a heatmap's pixels are a data: URI).
    assert re.findall(r'(?:src|href)="(?!#|data:image/png;base64,)([^"]*)"', html) == []


def test_model_names_and_labels_are_escaped_in_tables_cards_and_figures() -> None:
    report = _synthetic_report(model=HOSTILE)
    html = conversation_html(report)
    assert HOSTILE not in html and "<script" not in html.lower()
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 3  # a card, the tables, the figures' titles


# ------------------------------------------------------------------------------ runs (need bfcl-eval)

@pytest.fixture(scope="module")
def bfcl() -> None:
    """Runs need bfcl-eval's classes (the tests above do not)."""
    pytest.importorskip("bfcl_eval.eval_checker.multi_turn_eval.func_source_code.gorilla_file_system")


@pytest.fixture(scope="module")
def cli_run(bfcl: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("conv") / "run"
    assert main(["run", "call_modes", "--dataset", "bfcl:multi_turn_base", "--model", GT, "--model", NOISY,
                 "--limit", "2", "--run-dir", str(run_dir)]) == 0
    return run_dir


@pytest.fixture(scope="module")
def hostile_run(bfcl: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("hostile") / "run"
    conversations = load_conversations("bfcl:multi_turn_base", limit=1)
    run_conversations([Variant()], conversations, models=[HOSTILE_MODEL], run_dir=run_dir,
                      clients={HOSTILE_MODEL: HTML_ANSWERS}, describe={"dataset": "bfcl:multi_turn_base"})
    return run_dir


def test_a_hostile_answer_is_shown_escaped_never_as_markup(hostile_run: Path) -> None:
    html = conversation_run_html(hostile_run)
    assert HOSTILE not in html and HOSTILE_ARGUMENT not in html and "<img" not in html
    assert "<script" not in html.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(3)&gt;" in html  # the prose answer
    assert "&lt;/pre&gt;&lt;script&gt;alert(2)&lt;/script&gt;" in html  # the call's argument and its result
    assert html.count('class="episode"') == 1 and html.count('<div class="turn">') == 4


def test_ground_truth_transcript_is_whole_and_agrees_with_the_stored_verdict(cli_run: Path) -> None:
    run = open_conversation_run(cli_run)
    episodes = [e for e in run.episodes() if e.model == GT]
    conversations = {c.id: c for c in load_conversations("bfcl:multi_turn_base", limit=2)}
    for t in episode_transcripts(cli_run, episodes):
        conversation = conversations[t.episode.conversation_id]
        assert t.note == "" and len(t.turns) == len(conversation.turns)
        assert t.turns[0].messages[0]["role"] == "system" and t.turns[0].messages[-1]["role"] == "user"
        for turn in t.turns:
            details = (turn.verdict or {})["details"]
            assert len(turn.steps) == details["steps"]
            assert sum(len(s.calls) for s in turn.steps) == details["calls"]
            assert turn.steps[-1].ends_turn and not any(s.ends_turn for s in turn.steps[:-1])
            made = [c.call.split("(")[0] for s in turn.steps for c in s.calls]
            assert made == [call.name for call in conversation.ground_truth[turn.index]]
            assert all(c.refused is None and c.output for s in turn.steps for c in s.calls)


def test_failed_episodes_show_their_failure_and_state_differences(cli_run: Path) -> None:
    episodes = open_conversation_run(cli_run).episodes()
    # fake/noisy (seed 0) leaves a wrong state in some turn of these two conversations.
    wrong = next(e for e in episodes if e.model == NOISY and e.valid is False and any(
        turn["details"].get("state_differences") for turn in e.details["verdict"]["turns"]))
    html = conversation_run_html(cli_run, transcripts=[f"{wrong.conversation_id}#{wrong.repeat}"],
                                 max_transcripts=100)
    shown = [e for e in episodes if e.conversation_id == wrong.conversation_id and e.repeat == wrong.repeat]
    assert html.count('class="episode"') == len(shown)
    assert all(f"failed: {e.failure_mode}" in html for e in shown if e.valid is False)
    assert "State differences" in html
    paths = [d["path"] for turn in wrong.details["verdict"]["turns"]
             for found in (turn["details"].get("state_differences") or {}).values()
             for differences in found.values() for d in differences]
    assert paths and all(path in html for path in paths)


def test_default_choice_on_a_run_shows_failed_and_valid_episodes_within_the_bound(cli_run: Path) -> None:
    html = conversation_run_html(cli_run)
    n = html.count('class="episode"')
    assert 0 < n <= 12 and 'class="badge ok"' in html and 'class="badge bad"' in html
    assert "more chosen episode(s) not shown" in html  # 2 models x 9 variants give more than 12
    assert conversation_run_html(cli_run, max_transcripts=0).count('class="episode"') == 0


def test_other_generation_parameters_stop_the_transcript_with_a_note(cli_run: Path) -> None:
    episode = next(e for e in open_conversation_run(cli_run).episodes() if e.model == GT)
    (t,) = episode_transcripts(cli_run, [episode], model_params={GT: {"temperature": 1.5}})
    assert "no stored answer for turn 0, step 0" in t.note and "model_params" in t.note
    assert t.turns[0].steps == () and all(not turn.reached for turn in t.turns[1:])


def test_a_store_without_its_dataset_says_so_unless_conversations_are_given(bfcl: None, tmp_path: Path) -> None:
    conversations = load_conversations("bfcl:multi_turn_base", limit=1)
    run_conversations([Variant()], conversations, models=[GT], run_dir=tmp_path)
    (episode,) = open_conversation_run(tmp_path).episodes()
    (t,) = episode_transcripts(tmp_path, [episode])
    assert "does not name its dataset" in t.note and t.turns == ()
    (t,) = episode_transcripts(tmp_path, [episode], conversations=conversations)
    assert t.note == "" and len(t.turns) == len(conversations[0].turns)


def test_languages_get_their_figure_and_tables(bfcl: None, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    assert main(["run", "call_modes", "--dataset", "mini-mt:en,de", "--model", NOISY, "--variant",
                 "json->python,False", "--variant", "native", "--limit", "2", "--run-dir", str(run_dir)]) == 0
    html = conversation_run_html(run_dir, max_transcripts=2)
    assert 'id="figure-languages"' in html and 'id="languages"' in html
    assert 'id="lang-accuracy"' in html and 'id="lang-baseline"' in html


# ------------------------------------------------------------------------------ the CLI


def test_cli_writes_the_page_next_to_md_and_json_which_stay_as_they_were(
        cli_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = open_conversation_run(cli_run)
    assert main(["report", str(cli_run), "--format", "all", "--out", str(tmp_path / "all")]) == 0
    assert "conversations.html" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "all").iterdir()) == [
        "conversations.html", "conversations.json", "conversations.md"]
    report = run.report()
    assert (tmp_path / "all" / "conversations.md").read_text(encoding="utf-8") == report.to_markdown()
    data = json.loads((tmp_path / "all" / "conversations.json").read_text(encoding="utf-8"))
    assert data == {**json.loads(json.dumps(report.to_dict())), "languages": None}
    for fmt in ("md", "json"):
        assert main(["report", str(cli_run), "--format", fmt, "--out", str(tmp_path / fmt)]) == 0
        name = f"conversations.{fmt}"
        assert (tmp_path / fmt / name).read_bytes() == (tmp_path / "all" / name).read_bytes()
        assert not (tmp_path / fmt / "conversations.html").exists()

    assert main(["report", str(cli_run), "--format", "html", "--episode", "multi_turn_base_1#0",
                 "--out", str(tmp_path / "one")]) == 0
    html = (tmp_path / "one" / "conversations.html").read_text(encoding="utf-8")
    episodes = [e for e in run.episodes() if e.conversation_id == "multi_turn_base_1" and e.repeat == 0]
    assert html.count('class="episode"') == min(12, len(episodes))
    assert [p.name for p in (tmp_path / "one").iterdir()] == ["conversations.html"]


def test_cli_refuses_what_it_cannot_write_and_writes_nothing(
        cli_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["report", str(cli_run), "--format", "csv", "--out", str(out)]) == 2
    assert "md, json or html" in capsys.readouterr().err
    assert main(["report", str(cli_run), "--format", "md", "--episode", "multi_turn_base_0"]) == 2
    assert "--format html" in capsys.readouterr().err
    assert main(["report", str(cli_run), "--format", "all", "--episode", "multi_turn_base_7", "--out",
                 str(out)]) == 2
    assert "no episode of conversation 'multi_turn_base_7'" in capsys.readouterr().err
    assert main(["report", str(cli_run), "--format", "html", "--transcripts", "-1", "--out", str(out)]) == 2
    assert "0 or more" in capsys.readouterr().err
    assert not out.exists()
