"""score-file on bfcl-eval's multi-turn result lines: prompt answers and function-call objects, decoded without eval."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from promptgrid.matrix.cli import main
from promptgrid.matrix.conversations import DecodeFailure, ToolCall, decode_step, load_conversations

pytest.importorskip("mpmath")  # bfcl-eval's MathAPI (some entries use it)

ENTRIES = 3


def _python(calls: Any) -> str:
    return "[" + ", ".join(f"{c.name}({', '.join(f'{k}={v!r}' for k, v in c.arguments.items())})"
                           for c in calls) + "]"


def _lines(tmp_path: Path) -> Path:
    conversations = load_conversations("bfcl:multi_turn_base", limit=ENTRIES)
    lines = []
    for c in conversations:
        lines.append({"id": c.id, "result": [[_python(turn)] if turn else ["Nothing to do."] for turn in
                                             c.ground_truth]})
    c = conversations[0]
    fc = [[[{call.name: json.dumps(dict(call.arguments))} for call in turn]] for turn in c.ground_truth]
    lines.append({"id": c.id, "result": fc, "note": "function-call objects"})
    lines.append({"id": c.id, "result": [["I would move the file for you."] for _ in c.ground_truth]})
    path = tmp_path / "result.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + '\n{"id": "nope", "result": []}\n')
    return path


def test_ground_truth_answers_score_valid_and_prose_does_not(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "scored.jsonl"
    code = main(["score-file", str(_lines(tmp_path)), "--dataset", "bfcl:multi_turn_base", "--output", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and "result.jsonl:6: id 'nope' is not an entry of the dataset" in err
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    assert [s["valid"] for s in scored] == [True] * ENTRIES + [True, False]
    assert scored[3]["note"] == "function-call objects"  # the line's own fields are kept
    assert scored[4]["failure_mode"] == "decode_failure"  # prose is recorded, not silently dropped
    assert "scored 5 line(s): 4 correct" in err


def test_steps_decode_without_eval(tmp_path: Path) -> None:
    assert decode_step("[cd(folder='document')]") == (ToolCall("cd", {"folder": "document"}),)
    assert decode_step([{"cd": {"folder": "x"}}]) == (ToolCall("cd", {"folder": "x"}),)
    canary = tmp_path / "pwned"
    step = decode_step(f"[__import__('os').system('touch {canary}')]")
    assert not canary.exists()  # parsed as text (bfcl's parser reads the last name as the call), never run
    assert all(call.name != "__import__" for call in step if isinstance(step, tuple))
    assert isinstance(decode_step([{"cd": "{not json"}]), DecodeFailure)
    assert isinstance(decode_step(42), DecodeFailure)


def test_an_environment_that_cannot_go_on_costs_its_line_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from promptgrid.matrix.episodes import _conversation_play as _play  # score-file judges with its StateScorer
    from promptgrid.matrix.episodes._environment import EnvironmentFailure

    real = _play.check_conversation

    def second_line_explodes(conversation: Any, *args: Any, **kwargs: Any) -> Any:
        if conversation.id == "multi_turn_base_1":  # line 2 (lines are scored concurrently, written in order)
            raise EnvironmentFailure("the state of GorillaFileSystem has more than 100000 nodes", "state_too_large")
        return real(conversation, *args, **kwargs)

    monkeypatch.setattr(_play, "check_conversation", second_line_explodes)
    out = tmp_path / "scored.jsonl"
    code = main(["score-file", str(_lines(tmp_path)), "--dataset", "bfcl:multi_turn_base", "--output", str(out)])
    err = capsys.readouterr().err
    assert code == 1
    assert ("result.jsonl:2: the environment could not score it (state_too_large): the state of GorillaFileSystem "
            "has more than 100000 nodes; line skipped.") in err
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(scored) == 4 and [s["id"] for s in scored][:1] == ["multi_turn_base_0"]
    assert "scored 4 line(s)" in err


def test_bfcls_own_ground_truth_strings_score_valid_and_the_rule_is_recorded(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """multi_turn_base_0's ground truth as BFCL writes it: ``sort('final_report.pdf')`` is bound by position."""
    raw = [["cd(folder='document')", "mkdir(dir_name='temp')", "mv(source='final_report.pdf', destination='temp')"],
           ["cd(folder='temp')", "grep(file_name='final_report.pdf', pattern='budget analysis')"],
           ["sort('final_report.pdf')"],
           ["cd(folder='..')", "mv(source='previous_report.pdf', destination='temp')", "cd(folder='temp')",
            "diff(file_name1='final_report.pdf', file_name2='previous_report.pdf')"]]
    (conversation,) = load_conversations("bfcl:multi_turn_base", limit=1)
    assert conversation.ground_truth[2] == (ToolCall("sort", {"file_name": "final_report.pdf"}),)
    budget = {"id": "multi_turn_base_0", "result": [[f"[{call}]" for call in turn] for turn in raw]}
    unbindable = {"id": "multi_turn_base_0",
                  "result": [*budget["result"][:2], ["[sort('final_report.pdf', 'twice')]"], budget["result"][3]]}
    path = tmp_path / "raw.jsonl"
    path.write_text(json.dumps(budget) + "\n" + json.dumps(unbindable) + "\n")
    for flags, rule in (([], "bfcl"), (["--strict-arguments"], "strict")):
        out = tmp_path / f"scored_{rule}.jsonl"
        assert main(["score-file", str(path), "--dataset", "bfcl:multi_turn_base", "--output", str(out),
                     *flags]) == 0
        scored = [json.loads(line) for line in out.read_text().splitlines()]
        assert [s["valid"] for s in scored] == [True, False]
        assert {s["argument_rule"] for s in scored} == {rule}
        refused = scored[1]["turns"][2]["details"]["refused"]
        assert refused == [{"call": 'sort("final_report.pdf", "twice")', "reason": "bad_arguments"}]
        assert f"arguments: {rule}" in capsys.readouterr().err


def test_strict_arguments_is_refused_for_a_single_turn_dataset(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "lines.jsonl"
    path.write_text('{"variant_id": "x", "case_id": "y", "response": "[]"}\n')
    assert main(["score-file", str(path), "--dataset", "mini", "--strict-arguments"]) == 2
    assert "--strict-arguments applies to conversation datasets" in capsys.readouterr().err


def test_a_prompt_variants_answer_keeps_its_positional_arguments() -> None:
    from promptgrid.matrix.episodes._steps import decode_answer
    from promptgrid.matrix.scoring import variant_index
    from promptgrid.variants import CallMode, ReturnFormat

    variant = next(v for v in variant_index(None).values() if v.call_mode is CallMode.PROMPT
                   and v.return_format is ReturnFormat.PYTHON and not v.tool_call_tag)
    step, ended = decode_answer(variant, "[sort('final_report.pdf'), cd(folder='x')]", None, [])
    assert step == (ToolCall("sort", {}, ("final_report.pdf",)), ToolCall("cd", {"folder": "x"})) and not ended
    assert decode_step("[sort('final_report.pdf')]") == (ToolCall("sort", {}, ("final_report.pdf",)),)


def test_mini_mt_result_lines_are_scored_as_conversations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every conversation dataset is scored as conversations (the built-in mini-mt too, not only bfcl:multi_turn_*)."""
    conversations = load_conversations("mini-mt:de", limit=2)
    lines = [{"id": c.id, "result": [[[{call.name: dict(call.arguments)} for call in turn]] if turn else
                                     [[]] for turn in c.ground_truth]} for c in conversations]
    path = tmp_path / "mini.jsonl"
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    out = tmp_path / "scored.jsonl"
    assert main(["score-file", str(path), "--dataset", "mini-mt:de", "--output", str(out)]) == 0
    scored = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [s["valid"] for s in scored] == [True, True] and all("turns" in s for s in scored)
    assert "scored 2 line(s): 2 correct" in capsys.readouterr().err
