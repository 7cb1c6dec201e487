"""``promptgrid render RUN_DIR`` and ``promptgrid export RUN_DIR`` of a conversation run: the model's steps.

Runs are made offline through the CLI (so the store names its dataset and grid, and the steps are keyed with the
CLI's default generation parameters) with the scripted fakes on mini-mt, and with a test client whose answers and
call arguments hold terminal escape sequences. The transcripts are checked against what the run stored (step and
call counts, final answers, verdicts) and, for the ground truth, against ``render_conversation``'s trajectory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from promptgrid.errors import RunError
from promptgrid.matrix.api import open_conversation_run
from promptgrid.matrix.cli import main
from promptgrid.matrix.conversations import (
    EpisodeTranscript,
    Result,
    conversation_to_record,
    export_records,
    iter_transcripts,
    load_conversations,
    render_conversation,
    select_episodes,
    transcript_record,
    transcript_text,
)
from promptgrid.matrix.report._episode_export import json_line
from promptgrid.matrix.report._transcripts import TranscriptCall, TranscriptStep, TranscriptTurn
from promptgrid.variants import Variant, load_grid
from support.episodes import CallThenProse, made_turn, run_conversations

GT, NOISY = "fake/ground-truth", "fake/noisy:3"
PROMPT_LABEL = "json->python,False"
ESCAPES = "\x1b[2J\x1b[31m\x9b31m\u202e\x07"
"""Clear the screen, red, the one-byte CSI, a right-to-left override, a bell."""
RAW = ("\x1b", "\x9b", "\u202e", "\x07")
HOSTILE_MODEL = "test/escapes"
ESCAPE_ANSWERS = CallThenProse(HOSTILE_MODEL, f"[cd(folder='x{ESCAPES}')]", f"Done.{ESCAPES} All good.")
"""Answers holding terminal escapes (the characters themselves): a call with them in its argument (the file
system's error echoes it), then prose with them."""


def ep(model: str, vid: str, conv: str, repeat: int = 0, valid: bool | None = True) -> Result:
    return Result.episode(model=model, variant_id=vid, conversation_id=conv, category="multi_turn_base",
                          repeat=repeat, valid=valid, turns=(made_turn(0, bool(valid)),))


# ------------------------------------------------------------------------------ no bfcl-eval needed


def test_select_episodes_by_model_variant_label_case_and_repeat() -> None:
    eps = [ep("m", "a", "c1"), ep("m", "a", "c1", 1), ep("m", "b", "c2"), ep("n", "a", "c2")]
    labels = {"a": "A-label", "b": "B-label"}
    assert select_episodes(eps) == eps
    assert select_episodes(eps, models=["m"], variants=["A-label"], labels=labels) == eps[:2]
    assert select_episodes(eps, variants=["b"], labels=labels) == [eps[2]]
    assert select_episodes(eps, cases=["c2"], repeats=[0]) == [eps[2], eps[3]]
    assert select_episodes(eps, repeats=[1]) == [eps[1]]
    assert select_episodes(eps, limit=3) == eps[:3]
    with pytest.raises(RunError, match="no episode of model 'mm'.*Did you mean 'm'"):
        select_episodes(eps, models=["mm"])
    with pytest.raises(RunError, match="no episode of variant 'A-labl'.*Did you mean 'A-label'"):
        select_episodes(eps, variants=["A-labl"], labels=labels)
    with pytest.raises(RunError, match="no episode of conversation 'c3'"):
        select_episodes(eps, cases=["c3"])
    with pytest.raises(RunError, match=r"repeat 2 .*its repeats: 0, 1"):
        select_episodes(eps, repeats=[2])
    with pytest.raises(RunError, match="together"):
        select_episodes(eps, models=["n"], variants=["b"])


def _hostile_transcript() -> EpisodeTranscript:
    """A made-up transcript whose every model-written and environment-written text holds escapes."""
    episode = Result.episode(model="m", variant_id="v", conversation_id="c", category="multi_turn_base", repeat=0,
                             valid=False, failure_mode="wrong_end_state", turns=(made_turn(0, False),),
                             error=f"server said {ESCAPES}")
    verdict = {"turn": 0, "valid": False, "failure_mode": "wrong_end_state", "details": {
        "steps": 1, "calls": 1,
        "state_differences": {"FS": {"name": [{"path": "root.name", "model": f"x{ESCAPES}", "ground_truth": "y"}]}},
        "missing_calls": ["cd(folder='y')"], "extra_calls": [f"cd(folder='{ESCAPES}')"],
        "refused": [{"call": f"rm({ESCAPES})", "reason": "invalid_arguments"}]}}
    step = TranscriptStep(0, f"answer {ESCAPES}", (f"tool{ESCAPES}(...)",),
                          (TranscriptCall(f"cd(folder='{ESCAPES}')", f"no such folder {ESCAPES}",
                                          refused=None),), decode_error=f"bad {ESCAPES}", ends_turn=True)
    turn = TranscriptTurn(0, ({"role": "system", "content": "SYSTEM-TXT"}, {"role": "user", "content": "hi"}),
                          (step,), verdict)
    return EpisodeTranscript(episode, (turn,), note=f"stopped {ESCAPES}", labels={"v": f"label{ESCAPES}"})


def test_transcript_text_shows_every_part_and_escapes_every_control_character() -> None:
    text = transcript_text(_hostile_transcript())
    assert not any(c in text for c in RAW)
    assert text.count("\\x1b[2J\\x1b[31m\\x9b31m\\u202e\\x07") == 11  # each place the escapes were written
    lines = text.splitlines()
    assert lines[0].startswith("=== c | m | label") and lines[0].endswith("repeat 0 | failed: wrong_end_state")
    assert "--- system: 10 characters, not shown" in text and "SYSTEM-TXT" not in text
    assert "--- user\nhi\n--- step 0: answer (ends the turn)\nanswer " in text
    assert "    state differences (the model's environment against the ground truth's):" in text
    assert "      FS.root.name: model 'x\\x1b[2J" in text and "ground truth 'y'" in text
    assert "    expected calls not made:\n      cd(folder='y')" in text
    assert "--- turn 0 verdict: failed: wrong_end_state (left the environment in another state" in text
    assert lines[-1].startswith("--- the transcript stops here: stopped ")
    assert "--- system\nSYSTEM-TXT\n" in transcript_text(_hostile_transcript(), system=True)


def test_transcript_record_keeps_the_text_as_stored_and_json_line_makes_it_safe() -> None:
    record = transcript_record(_hostile_transcript(), system=False)
    assert record["complete"] is False and record["note"] == f"stopped {ESCAPES}"
    (turn,) = record["turns"]
    assert [m["role"] for m in turn["messages"]] == ["user"]
    assert turn["steps"] == [{"step": 0, "answer": f"answer {ESCAPES}", "tool_calls": [f"tool{ESCAPES}(...)"],
                              "calls": [{"call": f"cd(folder='{ESCAPES}')", "output": f"no such folder {ESCAPES}",
                                         "refused": None}],
                              "decode_error": f"bad {ESCAPES}", "ends_turn": True, "latency_s": None}]
    line = json_line({"transcript": record, "text": "\u2028ok é"})
    assert line.endswith("}\n") and line.count("\n") == 1 and not any(c in line for c in (*RAW, "\u2028"))
    assert "é" in line  # non-ASCII text stays readable
    assert json.loads(line) == {"transcript": record, "text": "\u2028ok é"}


# ------------------------------------------------------------------------------ runs (need bfcl-eval)


@pytest.fixture(scope="module")
def mini_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("bfcl_eval.eval_checker.multi_turn_eval.func_source_code.travel_booking")
    run_dir = tmp_path_factory.mktemp("mini") / "run"
    assert main(["run", "call_modes", "--dataset", "mini-mt:en", "--limit", "2", "--model", NOISY, "--model", GT,
                 "--variant", PROMPT_LABEL, "--variant", "native", "--run-dir", str(run_dir), "--no-progress"]) == 0
    return run_dir


def _turn_sections(text: str) -> list[str]:
    return text.split("\n## turn ")[1:]


def test_render_of_a_run_shows_each_stored_step_call_answer_and_verdict(
        mini_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    episodes = open_conversation_run(mini_run).episodes()
    assert len(episodes) == 8 and any(e.valid is False for e in episodes)
    transcripts = list(iter_transcripts(mini_run, episodes))
    for t in transcripts:
        e = t.episode
        assert t.note == "", t.note
        text = transcript_text(t)
        sections = _turn_sections(text)
        assert len(sections) == len(e.turns)
        for section, turn, final in zip(sections, e.turns, e.details["final_answers"], strict=True):
            steps, calls = turn.details["steps"], turn.n_predicted_calls
            assert section.count("\n--- step ") == steps and section.count("\n    call:   ") == calls
            assert section.count("\n    output: ") == calls
            assert final in section  # the answer that ended the turn, as the run stored it
            status = "valid" if turn.valid else f"failed: {turn.failure_mode.value}"
            assert f"\n--- turn {turn.turn} verdict: {status}" in section
    failed = next(t for t in transcripts if t.episode.valid is False)
    (bad,) = [v for v in failed.episode.details["verdict"]["turns"] if v["failure_mode"] == "wrong_end_state"][:1]
    section = _turn_sections(transcript_text(failed))[bad["turn"]]
    assert "state differences (the model's environment against the ground truth's)" in section
    for cls, attributes in bad["details"]["state_differences"].items():
        for found in attributes.values():
            assert all(f"      {cls}.{d['path']}: model " in section for d in found)

    e = failed.episode  # the CLI prints what the library gives, for the episode its options choose
    assert main(["render", str(mini_run), "--model", e.model, "--variant", failed.label, "--case",
                 e.conversation_id, "--repeat", str(e.repeat)]) == 0
    assert capsys.readouterr().out == transcript_text(failed) + "\n"


def test_transcripts_are_rebuilt_inside_a_running_event_loop_as_outside_it(mini_run: Path) -> None:
    """The rebuild plays each episode again with the run's own loop (``ConversationEpisode.play``, async); from a
    notebook, whose event loop is running, it plays on a worker thread's loop and gives the same transcripts."""
    import asyncio

    episodes = open_conversation_run(mini_run).episodes()
    outside = list(iter_transcripts(mini_run, episodes))

    async def in_a_notebook() -> list[Any]:
        return list(iter_transcripts(mini_run, episodes))

    inside = asyncio.run(in_a_notebook())
    assert inside == outside and all(t.note == "" and t.turns for t in inside)


def test_the_ground_truth_episode_has_the_outputs_of_the_ground_truth_trajectory(mini_run: Path) -> None:
    """The outputs are rebuilt by running the stored calls again: they equal the tool messages of the ground
    truth's trajectory as ``render_conversation`` plays it (another path: a whole episode run afresh)."""
    native = Variant(call_mode="native")
    conversations = {c.id: c for c in load_conversations("mini-mt:en", limit=2)}
    episodes = [e for e in open_conversation_run(mini_run).episodes() if e.model == GT and e.variant_id == native.id]
    assert len(episodes) == 2
    for t in iter_transcripts(mini_run, episodes):
        messages, _request = render_conversation(conversations[t.episode.conversation_id], native)
        expected = [m["content"] for m in messages if m["role"] == "tool"]
        got = [c.output for turn in t.turns for s in turn.steps for c in s.calls]
        assert got == expected and got
        written = [s.tool_calls for turn in t.turns for s in turn.steps if s.tool_calls]
        assert len(written) == sum(r.details["steps"] - 1 for r in t.episode.turns)  # every step but the closing answer


def test_cli_export_adds_the_steps_and_keeps_every_stored_field(mini_run: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "episodes.jsonl"
    assert main(["export", str(mini_run), "--output", str(out)]) == 0
    assert "exported 8 episodes" in capsys.readouterr().err
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    episodes = open_conversation_run(mini_run).episodes()
    conversations = {c.id: c for c in load_conversations("mini-mt:en", limit=2)}
    assert len(lines) == len(episodes)
    for line, e in zip(lines, episodes, strict=True):
        transcript = line.pop("transcript")
        assert line == json.loads(json.dumps(e.episode_dict(), default=str))  # the fields of before, unchanged
        assert transcript["complete"] is True and transcript["note"] == ""
        assert [t["turn"] for t in transcript["turns"]] == [t.turn for t in e.turns]
        for turn, stored in zip(transcript["turns"], e.turns, strict=True):
            assert all(m["role"] != "system" for m in turn["messages"])  # the long prompt is left out
            assert len(turn["steps"]) == stored.details["steps"]
            assert sum(len(s["calls"]) for s in turn["steps"]) == stored.n_predicted_calls
            assert turn["steps"][-1]["ends_turn"] and all(c["output"] for s in turn["steps"] for c in s["calls"])
            assert turn["verdict"]["valid"] == stored.valid
        first_user = conversations[e.conversation_id].turns[0][-1]["content"]
        assert transcript["turns"][0]["messages"][-1] == {"role": "user", "content": first_user}
    assert main(["export", str(mini_run)]) == 0  # standard output: the same lines
    assert [json.loads(line) for line in capsys.readouterr().out.splitlines()] == [
        json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def test_cli_render_jsonl_carries_the_whole_prompt(mini_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", str(mini_run), "--variant", "native", "--model", NOISY, "--limit", "1", "--jsonl"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    record = json.loads(line)
    assert record["trajectory"] == "run" and record["label"] == "native" and record["model"] == NOISY
    first = record["transcript"]["turns"][0]
    assert first["messages"][0]["role"] == "system" and first["steps"][0]["tool_calls"]


def test_cli_render_refuses_what_it_cannot_choose(mini_run: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    cases = [
        (["render", str(mini_run), "--model", "fake/noisy:4"], "Did you mean 'fake/noisy:3'"),
        (["render", str(mini_run), "--repeat", "3"], "no episode with repeat 3"),
        (["render", str(mini_run), "--variant", "nativ"], "Did you mean 'native'"),
        (["render", str(mini_run), "--store", str(tmp_path / "t.sqlite3")], "--store is for rendering a grid"),
        (["render", "call_modes"], "render GRID needs --dataset DS"),
        (["render", "call_modes", "--dataset", "mini-mt:en", "--model", GT], "--model and --repeat choose"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (argv, err)
    single = tmp_path / "single"
    assert main(["run", "demo", "--dataset", "mini:en", "--model", "fake/auto", "--limit", "1", "--run-dir",
                 str(single), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["render", str(single)]) == 0  # a single-turn run's jobs as they happened (one-step episodes)
    text = capsys.readouterr().out
    assert text.count("=== ") == len(load_grid("demo")) and "--- user\n" in text and "--- answer\n" in text
    assert "--- verdict: " in text
    assert main(["render", str(single), "--limit", "1", "--jsonl"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    record = json.loads(line)
    assert record["trajectory"] == "run" and record["model"] == "fake/auto" and record["messages"]
    assert record["status"] == "done" and isinstance(record["response"], str)
    assert main(["render", str(single), "--case", "nope"]) == 2
    assert "no episode of case 'nope'" in capsys.readouterr().err


def test_a_moved_dataset_is_a_note_in_the_export_and_render_reads_it_from_dataset(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("bfcl_eval.eval_checker.multi_turn_eval.func_source_code.travel_booking")
    data = tmp_path / "convs.jsonl"
    data.write_text("".join(json.dumps(conversation_to_record(c)) + "\n"
                            for c in load_conversations("mini-mt:en", limit=1)), encoding="utf-8")
    run_dir = tmp_path / "run"
    assert main(["run", "call_modes", "--dataset", f"jsonl:{data}", "--model", GT, "--variant", PROMPT_LABEL,
                 "--run-dir", str(run_dir), "--no-progress"]) == 0
    moved = data.rename(tmp_path / "moved.jsonl")
    capsys.readouterr()
    assert main(["export", str(run_dir)]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    record = json.loads(line)
    assert record["valid"] is True and record["transcript"]["complete"] is False
    assert "cannot be read now" in record["transcript"]["note"] and record["transcript"]["turns"] == []
    assert main(["render", str(run_dir)]) == 0
    assert "--- the transcript stops here: the run's dataset" in capsys.readouterr().out
    assert main(["render", str(run_dir), "--dataset", f"jsonl:{moved}"]) == 0
    text = capsys.readouterr().out
    assert "the transcript stops here" not in text and text.count("--- turn ") == 3 and "verdict: valid" in text


# ------------------------------------------------------------------------------ hostile answers


def test_hostile_escapes_are_neutralized_in_render_and_export(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("bfcl_eval.eval_checker.multi_turn_eval.func_source_code.gorilla_file_system")
    conversations = load_conversations("bfcl:multi_turn_base", limit=1)
    run_conversations([Variant()], conversations, models=[HOSTILE_MODEL], run_dir=tmp_path,
                      clients={HOSTILE_MODEL: ESCAPE_ANSWERS}, describe={"dataset": "bfcl:multi_turn_base"})
    (record,) = export_records(tmp_path)
    first = record["transcript"]["turns"][0]["steps"]
    assert ESCAPES in first[0]["answer"]  # the data, as stored
    assert "cd: 'x\\u001b[2J" in first[0]["calls"][0]["output"]  # what the model got back (the result is JSON)
    assert first[1]["answer"] == f"Done.{ESCAPES} All good."
    for argv in (["render", str(tmp_path)], ["render", str(tmp_path), "--jsonl"], ["export", str(tmp_path)]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert out and not any(c in out for c in RAW), argv
        if argv[-1] == "--jsonl" or argv[0] == "export":
            (line,) = out.splitlines()
            steps = json.loads(line)["transcript"]["turns"][0]["steps"]
            assert steps[1]["answer"] == f"Done.{ESCAPES} All good."  # escaped in the line, not lost
        else:
            assert "Done.\\x1b[2J\\x1b[31m\\x9b31m\\u202e\\x07 All good." in out
            assert "[cd(folder='x\\x1b[2J\\x1b[31m\\x9b31m\\u202e\\x07')]" in out  # the answer with its call
    assert json.loads(json_line(record)) == record


def test_a_run_given_generation_parameters_is_rebuilt_from_the_parameters_it_recorded(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Step keys include the generation parameters; the run records them (meta ``model_params``), so the export of a
    run at temperature 1 with repeats rebuilds every transcript without being told the parameters."""
    run = tmp_path / "hot"
    assert main(["run", "call_modes", "--dataset", "mini-mt:en", "--model", "fake/noisy:3", "--limit", "2",
                 "--repeats", "2", "--temperature", "1", "--run-dir", str(run)]) == 0
    capsys.readouterr()
    assert main(["export", str(run), "--jsonl"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert records and all(record["transcript"]["complete"] for record in records)
