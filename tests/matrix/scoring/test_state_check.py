"""The multi-turn checker: the ground truth passes, each failure mode from a crafted trajectory, bfcl-eval agrees.

Crafted trajectories are built on two entries of bfcl:multi_turn_base:

- ``multi_turn_base_0`` (GorillaFileSystem, TwitterAPI), four turns: (0) ``cd
  document``, ``mkdir temp``, ``mv final_report.pdf temp``; (1) ``cd temp``,
  ``grep``; (2) ``sort``; (3) ``cd ..``, ``mv previous_report.pdf temp``,
  ``cd temp``, ``diff``. ``cd`` changes no public attribute (the current
  directory is private), ``grep``/``sort``/``diff`` only read.
- ``multi_turn_base_180`` (TravelAPI, TicketAPI), six turns, of which turns
  3 and 4 have an empty ground truth (irrelevance turns).

Where bfcl-eval can score the same trajectory (no decode-failure marker, no
strict irrelevance), its ``multi_turn_checker`` is asked too and must agree.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from promptgrid.matrix.datasets._conversations import Conversation, load_conversations
from promptgrid.matrix.episodes._environment import ToolCall
from promptgrid.matrix.scoring.state_check import (
    MAXIMUM_STEP_LIMIT,
    ConversationVerdict,
    DecodeFailure,
    TurnFailureMode,
    check_conversation,
    run_ground_truth,
)
from promptgrid.matrix.scoring.verdict import ErrorCode
from support.scripts import load_script

M = TurnFailureMode


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("benchmarks/multi_turn_agreement.py")


@pytest.fixture(scope="module")
def base() -> dict[str, Conversation]:
    return {conversation.id: conversation for conversation in load_conversations("bfcl:multi_turn_base")}


@pytest.fixture(scope="module")
def reference(bench: ModuleType) -> Any:
    pytest.importorskip("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker")
    return bench.BfclReference("multi_turn_base")


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(name, arguments)


def steps(turn: Sequence[ToolCall]) -> list[list[ToolCall]]:
    """One call per step, as a model calling one function at a time makes them."""
    return [[c] for c in turn]


def truth(conversation: Conversation) -> list[list[list[ToolCall]]]:
    return [steps(turn) for turn in conversation.ground_truth]


def replace_turn(conversation: Conversation, index: int, turn: list[Any]) -> list[list[Any]]:
    turns: list[list[Any]] = truth(conversation)
    turns[index] = turn
    return turns


def failure(verdict: ConversationVerdict) -> tuple[int, TurnFailureMode | None, ErrorCode]:
    failed = verdict.first_failure
    assert failed is not None, "expected an invalid trajectory"
    return failed.turn or 0, failed.failure_mode, failed.error_code


def agrees(bench: ModuleType, reference: Any, conversation: Conversation, turns: list[list[list[ToolCall]]],
           verdict: ConversationVerdict) -> None:
    """bfcl-eval's multi_turn_checker gives the same entry verdict and, when invalid, the same error type."""
    trajectory = bench.Trajectory(conversation.id, "crafted", tuple(tuple(tuple(s) for s in t) for t in turns))
    theirs = reference.verdict(trajectory)
    assert (verdict.valid, verdict.error_code.bfcl_error_type) == (theirs.valid, theirs.error_type), theirs.message


# --------------------------------------------------------------------------- the ground truth


@pytest.mark.slow
def test_ground_truth_is_valid_on_every_base_entry(base: dict[str, Conversation]) -> None:
    assert len(base) == 200
    start = time.perf_counter()
    invalid = {}
    for conversation in base.values():
        run = run_ground_truth(conversation)
        assert run.refused == (), conversation.id
        verdict = check_conversation(conversation, truth(conversation), ground_truth=run)
        if not verdict.valid:
            invalid[conversation.id] = verdict.to_dict()
    assert invalid == {}
    print(f"200 ground-truth trajectories in {time.perf_counter() - start:.1f} s")


def test_ground_truth_in_one_step_per_turn_is_valid(base: dict[str, Conversation]) -> None:
    conversation = base["multi_turn_base_0"]
    verdict = check_conversation(conversation, [[list(turn)] for turn in conversation.ground_truth])
    assert verdict.valid and verdict.failure_mode is None and verdict.error_code is ErrorCode.VALID
    assert [turn.valid for turn in verdict.turns] == [True] * 4
    assert verdict.turns[0].details["calls"] == 3 and verdict.turns[0].details["steps"] == 1


def test_a_kept_ground_truth_run_gives_the_same_verdicts(base: dict[str, Conversation]) -> None:
    conversation = base["multi_turn_base_0"]
    run = run_ground_truth(conversation)
    dropped = replace_turn(conversation, 0, steps(conversation.ground_truth[0][:2]))
    for turns in (truth(conversation), dropped):
        assert check_conversation(conversation, turns, ground_truth=run) == check_conversation(conversation, turns)
    with pytest.raises(ValueError, match="multi_turn_base_1"):
        check_conversation(base["multi_turn_base_1"], truth(base["multi_turn_base_1"]), ground_truth=run)


# --------------------------------------------------------------------------- each failure mode


def test_missing_call(base: dict[str, Conversation], bench: ModuleType, reference: Any) -> None:
    conversation = base["multi_turn_base_0"]
    turns = replace_turn(conversation, 0, [])
    verdict = check_conversation(conversation, turns)
    assert failure(verdict) == (0, M.MISSING_CALL, ErrorCode.MULTI_TURN_EMPTY_TURN)
    agrees(bench, reference, conversation, turns, verdict)


def test_wrong_end_state(base: dict[str, Conversation], bench: ModuleType, reference: Any) -> None:
    conversation = base["multi_turn_base_0"]
    cd, _mkdir, mv = conversation.ground_truth[0]
    turns = replace_turn(conversation, 0, steps([cd, mv]))  # no mkdir: the file is renamed to "temp"
    verdict = check_conversation(conversation, turns)
    assert failure(verdict) == (0, M.WRONG_END_STATE, ErrorCode.MULTI_TURN_INSTANCE_STATE_MISMATCH)
    details = verdict.turns[0].details
    assert details["missing_calls"] == ['mkdir(dir_name="temp")'] and details["extra_calls"] == []
    assert list(details["state_differences"]) == ["GorillaFileSystem"]
    agrees(bench, reference, conversation, turns, verdict)


def test_extra_state_change(base: dict[str, Conversation], bench: ModuleType, reference: Any) -> None:
    conversation = base["multi_turn_base_0"]
    turns = replace_turn(conversation, 0, steps([*conversation.ground_truth[0], call("touch", file_name="x.txt")]))
    verdict = check_conversation(conversation, turns)
    assert failure(verdict) == (0, M.EXTRA_STATE_CHANGE, ErrorCode.MULTI_TURN_INSTANCE_STATE_MISMATCH)
    assert verdict.turns[0].details["extra_calls"] == ['touch(file_name="x.txt")']
    differences = verdict.turns[0].details["state_differences"]["GorillaFileSystem"]["root"]
    assert any(d["path"].endswith(".x.txt") and d["model"] != "<absent>" and d["ground_truth"] == "<absent>"
               for d in differences)
    agrees(bench, reference, conversation, turns, verdict)


def test_missing_result(base: dict[str, Conversation], bench: ModuleType, reference: Any) -> None:
    conversation = base["multi_turn_base_0"]
    cd, _grep = conversation.ground_truth[1]
    turns = replace_turn(conversation, 1, steps([cd]))  # the state matches; grep's result is missing
    verdict = check_conversation(conversation, turns)
    assert failure(verdict) == (1, M.MISSING_RESULT, ErrorCode.MULTI_TURN_EXECUTION_RESPONSE_MISMATCH)
    assert len(verdict.turns[1].details["missing_results"]) == 1
    agrees(bench, reference, conversation, turns, verdict)


def test_a_result_from_an_earlier_turn_counts(base: dict[str, Conversation], bench: ModuleType,
                                              reference: Any) -> None:
    """The response check looks at the model's results of every turn so far, as bfcl-eval's does."""
    conversation = base["multi_turn_base_0"]
    (sort,) = conversation.ground_truth[2]
    turns = truth(conversation)
    turns[1] = steps([*conversation.ground_truth[1], sort])  # sorted one turn early
    turns[2] = steps([call("pwd")])  # and only looked around in the sorting turn
    verdict = check_conversation(conversation, turns)
    assert verdict.valid
    agrees(bench, reference, conversation, turns, verdict)
    turns[1] = steps(conversation.ground_truth[1])
    verdict = check_conversation(conversation, turns)
    assert failure(verdict) == (2, M.MISSING_RESULT, ErrorCode.MULTI_TURN_EXECUTION_RESPONSE_MISMATCH)
    agrees(bench, reference, conversation, turns, verdict)


@pytest.mark.parametrize("strict", [False, True])
def test_call_refused(base: dict[str, Conversation], strict: bool) -> None:
    conversation = base["multi_turn_base_0"]
    cd, mkdir, mv = conversation.ground_truth[0]
    unbindable = ToolCall("mkdir", {}, ("temp", 7))
    for refused in (call("_load_scenario", scenario={}), call("__class__"), call("no_such_function", dir_name="temp"),
                    unbindable, *([call("mkdir", dir_name="temp", mode=7)] if strict else [])):
        verdict = check_conversation(conversation, replace_turn(conversation, 0, steps([cd, refused, mv])),
                                     strict_arguments=strict)
        assert failure(verdict) == (0, M.CALL_REFUSED, ErrorCode.MULTI_TURN_INSTANCE_STATE_MISMATCH), refused
        (entry,) = verdict.turns[0].details["refused"]
        assert entry["call"].startswith(refused.name) and entry["reason"]
        assert verdict.argument_rule == ("strict" if strict else "bfcl")


def test_a_refused_call_that_is_repaired_leaves_the_turn_valid(base: dict[str, Conversation]) -> None:
    conversation = base["multi_turn_base_0"]
    cd, mkdir, mv = conversation.ground_truth[0]
    verdict = check_conversation(conversation, replace_turn(conversation, 0, steps([cd, call("__class__"), mkdir, mv])))
    assert verdict.valid and len(verdict.turns[0].details["refused"]) == 1


def test_decode_failure(base: dict[str, Conversation]) -> None:
    conversation = base["multi_turn_base_0"]
    cd, _mkdir, _mv = conversation.ground_truth[0]
    broken = DecodeFailure("[mkdir(dir_name='temp'", "unclosed bracket")
    verdict = check_conversation(conversation, replace_turn(conversation, 0, [[cd], broken]))
    assert failure(verdict) == (0, M.DECODE_FAILURE, ErrorCode.MULTI_TURN_INSTANCE_STATE_MISMATCH)
    assert verdict.turns[0].details["decode_failures"] == [{"step": 1, "error": "unclosed bracket"}]
    # A turn whose only answer does not decode made no call: still named a decode failure.
    verdict = check_conversation(conversation, replace_turn(conversation, 0, [broken]))
    assert failure(verdict) == (0, M.DECODE_FAILURE, ErrorCode.MULTI_TURN_EMPTY_TURN)


def test_a_decode_failure_in_a_turn_that_passes_is_recorded_not_failed(base: dict[str, Conversation]) -> None:
    conversation = base["multi_turn_base_0"]
    turns = replace_turn(conversation, 0, [*steps(conversation.ground_truth[0]), DecodeFailure("Done!", "prose")])
    verdict = check_conversation(conversation, turns)
    assert verdict.valid
    assert verdict.turns[0].details["decode_failures"] == [{"step": 3, "error": "prose"}]


def test_step_limit(base: dict[str, Conversation], bench: ModuleType, reference: Any) -> None:
    conversation = base["multi_turn_base_0"]
    first = steps(conversation.ground_truth[0])
    padding = MAXIMUM_STEP_LIMIT - len(first)
    at_limit = replace_turn(conversation, 0, [*first, *([[call("pwd")]] * padding), []])
    verdict = check_conversation(conversation, at_limit)
    assert verdict.valid  # 20 steps with calls, then an answer without: bfcl-eval lets that through
    agrees(bench, reference, conversation, at_limit, verdict)
    over = replace_turn(conversation, 0, [*first, *([[call("pwd")]] * (padding + 1))])
    verdict = check_conversation(conversation, over)
    assert failure(verdict) == (0, M.STEP_LIMIT, ErrorCode.MULTI_TURN_FORCE_TERMINATED)
    assert verdict.turns[0].details["steps_with_calls"] == MAXIMUM_STEP_LIMIT + 1
    assert check_conversation(conversation, over, step_limit=None).valid


def test_turns_after_a_force_quit_are_not_reached(base: dict[str, Conversation], bench: ModuleType,
                                                  reference: Any) -> None:
    conversation = base["multi_turn_base_0"]
    turns = truth(conversation)[:2]
    verdict = check_conversation(conversation, turns)
    assert failure(verdict) == (2, M.NOT_REACHED, ErrorCode.MULTI_TURN_FORCE_TERMINATED)
    assert [turn.failure_mode for turn in verdict.turns] == [None, None, M.NOT_REACHED, M.NOT_REACHED]
    agrees(bench, reference, conversation, turns, verdict)
    with pytest.raises(ValueError, match="5 turns"):
        check_conversation(conversation, [*truth(conversation), []])


def test_irrelevance_turns(base: dict[str, Conversation], bench: ModuleType, reference: Any) -> None:
    conversation = base["multi_turn_base_180"]
    assert [len(turn) for turn in conversation.ground_truth][3:5] == [0, 0]
    look = call("get_flight_cost", travel_from="LAX", travel_to="JFK", travel_date="2026-10-12",
                travel_class="business")
    turns = replace_turn(conversation, 3, steps([look]))
    # bfcl-eval's rule: a read-only call in an irrelevance turn changes nothing that is checked.
    verdict = check_conversation(conversation, turns)
    assert verdict.valid and verdict.turns[3].details["calls"] == 1
    agrees(bench, reference, conversation, turns, verdict)
    # multi_turn_irrelevance_checker's rule, on request: no call at all.
    verdict = check_conversation(conversation, turns, strict_irrelevance=True)
    assert failure(verdict) == (3, M.IRRELEVANCE_VIOLATED, ErrorCode.MULTI_TURN_IRRELEVANCE_DECODER_SUCCESS)
    assert [turn.turn for turn in verdict.turns if not turn.valid] == [3]
    assert check_conversation(conversation, truth(conversation), strict_irrelevance=True).valid
    # A call that changes the state in an irrelevance turn shows up at the next turn with a ground truth.
    budget = call("set_budget_limit", access_token="abc123xyz", budget_limit=1.0)
    turns = replace_turn(conversation, 4, steps([budget]))
    verdict = check_conversation(conversation, turns)
    assert failure(verdict) == (5, M.WRONG_END_STATE, ErrorCode.MULTI_TURN_INSTANCE_STATE_MISMATCH)
    assert verdict.turns[4].valid
    agrees(bench, reference, conversation, turns, verdict)


def test_deviation_a_mention_on_a_tweet_posted_with_the_default_mentions(
        base: dict[str, Conversation], bench: ModuleType, reference: Any) -> None:
    """bfcl-eval calls this valid: its model and ground-truth tweets share ``post_tweet``'s default list.

    ``post_tweet(content=...)`` stores the method's default ``mentions=[]``
    list itself in the tweet, and ``mention`` extends it in place. In
    bfcl-eval both instances live in one process, so the ground truth's tweet
    holds the very list the model's mention extended, and the states compare
    equal. Each promptgrid environment is a process of its own: the model's
    tweet has the mention, the ground truth's has not.
    """
    conversation = base["multi_turn_base_65"]
    (post,) = [c for c in conversation.ground_truth[0] if c.name == "post_tweet"]
    assert "mentions" not in post.arguments
    turns = replace_turn(conversation, 1, steps([*conversation.ground_truth[1],
                                                 call("mention", tweet_id=5, mentioned_usernames=["@pitcrew"])]))
    verdict = check_conversation(conversation, turns)
    assert failure(verdict) == (1, M.EXTRA_STATE_CHANGE, ErrorCode.MULTI_TURN_INSTANCE_STATE_MISMATCH)
    trajectory = bench.Trajectory(conversation.id, "crafted", tuple(tuple(tuple(s) for s in t) for t in turns))
    theirs = reference.verdict(trajectory)
    assert theirs.valid and theirs.defaults_changed == ("TwitterAPI.post_tweet",)


def test_deviation_a_method_name_inside_a_string_argument(tmp_path: Path, bench: ModuleType) -> None:
    """bfcl-eval rewrites ``cat(`` inside a string literal into its instance's name, which differs per side.

    Its executor prefixes every ``name(`` of a method of the involved classes
    with the instance's variable name, by a regular expression that does not
    skip string literals; the model's and the ground truth's variables are
    named differently, so the written note differs and even the ground truth
    fails. promptgrid passes arguments as data.
    """
    pytest.importorskip("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker")
    entry = {"id": "multi_turn_text_0", "question": [[{"role": "user", "content": "Write a note."}]],
             "involved_classes": ["GorillaFileSystem"],
             "initial_config": {"GorillaFileSystem": {"root": {"me": {"type": "directory", "contents": {}}}}},
             "ground_truth": [["touch(file_name='notes.txt')",
                               "echo(content='Tip: cat(notes.txt) shows it', file_name='notes.txt')"]]}
    path = tmp_path / "notes.jsonl"
    path.write_text(json.dumps(entry) + "\n", encoding="utf-8")
    (conversation,) = load_conversations(f"jsonl:{path}")
    turns = truth(conversation)
    assert check_conversation(conversation, turns).valid
    trajectory = bench.Trajectory(conversation.id, "crafted", tuple(tuple(tuple(s) for s in t) for t in turns))
    theirs = bench.BfclReference("multi_turn_base", [entry]).verdict(trajectory)
    assert (theirs.valid, theirs.error_type) == (False, "multi_turn:instance_state_mismatch")


def test_a_number_as_a_string_is_valid_by_default_and_refused_under_the_strict_rule(
        base: dict[str, Conversation], bench: ModuleType, reference: Any) -> None:
    """A number given as a string runs in bfcl-eval (``set_budget_limit`` converts it): valid by default, as
    there; the strict rule refuses it, and each verdict says how the other rule scores the turn."""
    conversation = base["multi_turn_base_180"]
    exchange, budget = conversation.ground_truth[0]
    as_text = call("set_budget_limit", **{**budget.arguments, "budget_limit": str(budget.arguments["budget_limit"])})
    turns = replace_turn(conversation, 0, steps([exchange, as_text]))
    lenient = check_conversation(conversation, turns)
    assert lenient.valid and lenient.argument_rule == "bfcl"
    assert lenient.turns[0].details["argument_rule_disagrees"] == {
        "other_rule": "strict", "valid": False, "failure_mode": "call_refused"}
    assert lenient.to_dict()["argument_rule"] == "bfcl"
    agrees(bench, reference, conversation, turns, lenient)
    strict = check_conversation(conversation, turns, strict_arguments=True)
    assert failure(strict) == (0, M.CALL_REFUSED, ErrorCode.MULTI_TURN_INSTANCE_STATE_MISMATCH)
    assert strict.turns[0].details["refused"][0]["reason"] == "bad_arguments"
    assert strict.turns[0].details["argument_rule_disagrees"] == {"other_rule": "bfcl", "valid": True,
                                                                  "failure_mode": None}
    assert strict.argument_rule == "strict" and strict.to_dict()["argument_rule"] == "strict"
    # The refused budget limit leaves every later turn in another state: each of those turns disagrees too.
    assert lenient.argument_rule_disagreements == strict.argument_rule_disagreements == sum(
        not turn.valid for turn in strict.turns) >= 2


def test_no_second_scoring_without_a_call_the_rules_treat_differently(base: dict[str, Conversation]) -> None:
    conversation = base["multi_turn_base_0"]
    made: list[bool] = []

    def make_env(*args: Any, **kwargs: Any) -> Any:
        from promptgrid.matrix.episodes._environment import Environment

        made.append(bool(kwargs.get("strict_arguments")))
        return Environment(*args, **kwargs)

    truth_run = run_ground_truth(conversation)
    assert check_conversation(conversation, truth(conversation), make_env=make_env, ground_truth=truth_run).valid
    assert made == [False]


def test_an_unknown_keyword_runs_and_gives_bfcl_evals_type_error(base: dict[str, Conversation], bench: ModuleType,
                                                                  reference: Any) -> None:
    conversation = base["multi_turn_base_0"]
    cd, mkdir, mv = conversation.ground_truth[0]
    turns = replace_turn(conversation, 0, steps([call("cd", folder="document", evil=1), cd, mkdir, mv]))
    verdict = check_conversation(conversation, turns)
    assert verdict.valid and "refused" not in verdict.turns[0].details  # it ran; the method raised
    agrees(bench, reference, conversation, turns, verdict)
    strict = check_conversation(conversation, turns, strict_arguments=True)
    assert strict.valid and strict.turns[0].details["refused"][0]["reason"] == "bad_arguments"
    # Scored again under the other rule (a call the rules treat differently), the same validity: no note.
    assert verdict.argument_rule_disagreements == strict.argument_rule_disagreements == 0


def test_positional_ground_truth_sent_back_as_the_answer_is_valid(base: dict[str, Conversation],
                                                                   bench: ModuleType) -> None:
    """BFCL's own ground truth, ``sort('final_report.pdf')`` included, as the model's answer text."""
    from promptgrid.matrix.scoring._score_conversations import decode_step

    conversation = base["multi_turn_base_0"]
    raw = bench.BfclReference("multi_turn_base").raw_truth(conversation.id) if _has_reference() else [
        ["cd(folder='document')", "mkdir(dir_name='temp')", "mv(source='final_report.pdf', destination='temp')"],
        ["cd(folder='temp')", "grep(file_name='final_report.pdf', pattern='budget analysis')"],
        ["sort('final_report.pdf')"],
        ["cd(folder='..')", "mv(source='previous_report.pdf', destination='temp')", "cd(folder='temp')",
         "diff(file_name1='final_report.pdf', file_name2='previous_report.pdf')"]]
    assert "sort('final_report.pdf')" in raw[2]
    turns = [[decode_step(f"[{text}]") for text in turn] for turn in raw]
    assert turns[2] == [(ToolCall("sort", {}, ("final_report.pdf",)),)]
    for strict in (False, True):
        verdict = check_conversation(conversation, turns, strict_arguments=strict)
        assert verdict.valid, verdict.to_dict()
        assert verdict.turns[2].details["calls"] == 1


def test_an_unbindable_positional_call_is_refused_naming_the_call(base: dict[str, Conversation]) -> None:
    from promptgrid.matrix.scoring._score_conversations import decode_step

    conversation = base["multi_turn_base_0"]
    turns = truth(conversation)
    turns[2] = [decode_step("[sort('final_report.pdf', 'again')]")]
    verdict = check_conversation(conversation, turns)
    assert failure(verdict) == (2, M.CALL_REFUSED, ErrorCode.MULTI_TURN_EXECUTION_RESPONSE_MISMATCH)
    assert verdict.turns[2].details["refused"] == [{"call": 'sort("final_report.pdf", "again")',
                                                     "reason": "bad_arguments"}]


def _has_reference() -> bool:
    try:
        import bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker  # noqa: F401
    except ImportError:
        return False
    return True


def test_every_turn_is_scored_after_a_failure(base: dict[str, Conversation]) -> None:
    conversation = base["multi_turn_base_0"]
    cd, _grep = conversation.ground_truth[1]
    verdict = check_conversation(conversation, replace_turn(conversation, 1, steps([cd])))
    assert [turn.valid for turn in verdict.turns] == [True, False, True, True]
    assert verdict.to_dict()["turns"][1]["failure_mode"] == "missing_result"
    assert verdict.to_dict()["bfcl_error_type"] == "multi_turn:execution_response_mismatch"


def test_failure_modes_have_descriptions() -> None:
    assert all(mode.description for mode in TurnFailureMode)


# --------------------------------------------------------------------------- agreement with bfcl-eval


def test_agreement_with_bfcl_eval_on_a_sample(base: dict[str, Conversation], bench: ModuleType,
                                              reference: Any) -> None:
    """40 trajectories of the benchmark (10 entries spread over the classes x 4 kinds): the same verdicts."""
    sample = [base[f"multi_turn_base_{number}"] for number in range(0, 200, 20)]
    rows = bench.compare(sample)
    assert len(rows) >= 70 and {row.trajectory.kind for row in rows} == set(bench.KINDS)
    assert [(row.trajectory.entry_id, row.trajectory.kind) for row in rows if not row.agrees] == []
    assert sum(row.ours.valid for row in rows) >= 30
    assert all(row.ours.valid for row in rows if row.trajectory.kind == "truth_text")
