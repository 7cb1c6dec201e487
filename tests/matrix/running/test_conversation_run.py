"""The multi-turn conversation runner: episodes scored, messages as bfcl-eval sends them, resume, bounds, refusals.

Everything runs offline on BFCL's own entries with the scripted fakes
(``fake/ground-truth``, ``fake/hostile``) and ``fake/prose``. The reference
for the prompt-mode results message is bfcl-eval's own code: its decoder,
executor and ``format_execution_results_prompting`` (``model_handler/utils.py``
loaded privately with stand-ins, ``support.bfcl``). A few conversations per
test keep the file fast.
"""

from __future__ import annotations

import ast
import asyncio
import copy
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from promptgrid.errors import RunError
from promptgrid.matrix.api import Run as ConversationRun
from promptgrid.matrix.cli import main
from promptgrid.matrix.clients._base import Completion
from promptgrid.matrix.conversations import (
    CANARY,
    TAU_BENCH_PASS_K,
    TICKET_BENCH_PASS_K,
    Conversation,
    EpisodeContext,
    Result,
    ScriptedClient,
    conversation_store,
    conversation_to_record,
    first_turn_messages,
    is_conversation_dataset,
    load_conversations,
)
from promptgrid.matrix.episodes._environment import EnvironmentFailure
from promptgrid.matrix.episodes._steps import ADDITIONAL_FUNCTIONS_PROMPT
from promptgrid.providers import ErrorKind, call_error
from promptgrid.variants import Variant
from support.bfcl import load_bfcl_modules
from support.episodes import run_conversations

pytest.importorskip("bfcl_eval.eval_checker.multi_turn_eval.func_source_code.gorilla_file_system")
pytest.importorskip("mpmath")  # bfcl-eval's MathAPI (the hostile test's entries use it)

GT = "fake/ground-truth"
PROMPT = Variant()
NATIVE = Variant(call_mode="native")
CONSTRAINED = Variant(call_mode="constrained")
CONSTRAINED_JSON = Variant(call_mode="constrained", return_format="json")


# --------------------------------------------------------------------------- helpers

class Recorder:
    """A conversation client that records what it is sent and answers as ``fake/ground-truth``."""

    takes_episode = True

    def __init__(self, model: str = GT) -> None:
        self.inner = ScriptedClient(model)
        self.name = model
        self.sent: list[tuple[list[dict[str, Any]], Mapping[str, Any] | None, EpisodeContext, Completion]] = []
        self.closed = False

    async def complete(self, messages: Any, params: Mapping[str, Any], *, request: Mapping[str, Any] | None = None,
                       episode: EpisodeContext | None = None) -> Completion:
        assert episode is not None
        completion = await self.inner.complete(messages, params, request=request, episode=episode)
        self.sent.append((copy.deepcopy(list(messages)), copy.deepcopy(request), episode, completion))
        return completion

    async def aclose(self) -> None:
        self.closed = True

    def requests(self, variant: Variant, conversation_id: str) -> list[tuple[list[dict[str, Any]],
                                                                            Mapping[str, Any] | None,
                                                                            EpisodeContext, Completion]]:
        return [s for s in self.sent if s[2].variant.id == variant.id and s[2].conversation.id == conversation_id]


class Failing:
    """A client whose calls fail with ``kind`` the first ``failures`` times each step is sent (always: None)."""

    takes_episode = True

    def __init__(self, kind: ErrorKind, failures: int | None = None, *, retry_after: float | None = 0.01,
                 message: str = "bad key") -> None:
        self.inner = ScriptedClient(GT)
        self.name = GT
        self.kind, self.failures, self.retry_after, self.message = kind, failures, retry_after, message
        self.attempts: dict[tuple[str, str, int, int, int], int] = {}

    async def complete(self, messages: Any, params: Mapping[str, Any], *, request: Mapping[str, Any] | None = None,
                       episode: EpisodeContext | None = None) -> Completion:
        assert episode is not None
        key = (episode.variant.id, episode.conversation.id, episode.turn, episode.step, len(messages))
        self.attempts[key] = self.attempts.get(key, 0) + 1
        if self.failures is None or self.attempts[key] <= self.failures:
            raise call_error(self.kind, self.message, retry_after=self.retry_after)
        return await self.inner.complete(messages, params, request=request, episode=episode)

    async def aclose(self) -> None:
        pass


def normalized(results: str) -> list[tuple[Any, ...]]:
    """A prompt-mode results message with each call name read as (function, arguments) instead of as text."""
    out = []
    for item in ast.literal_eval(results):
        call = ast.parse(item["name"], mode="eval").body
        assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and not call.args
        arguments = [(kw.arg, ast.literal_eval(kw.value)) for kw in call.keywords]
        out.append((item["role"], call.func.id, arguments, item["content"], sorted(item)))
    return out


def outcome(result: Result) -> tuple[Any, ...]:
    return (result.model, result.variant_id, result.conversation_id, result.repeat, result.valid,
            result.failure_mode, result.turns)


def outcomes(results: list[Result]) -> list[tuple[Any, ...]]:
    return sorted(outcome(r) for r in results)


@pytest.fixture(scope="module")
def base() -> list[Conversation]:
    return load_conversations("bfcl:multi_turn_base", limit=3)


@pytest.fixture(scope="module")
def bfcl_reference() -> Iterator[tuple[Any, Any]]:
    """(bfcl-eval's model_handler utils, its ``execute_multi_turn_func_call``), with a temporary project root."""
    old = os.environ.get("BFCL_PROJECT_ROOT")
    with tempfile.TemporaryDirectory(prefix="bfcl-root-") as root:
        os.environ["BFCL_PROJECT_ROOT"] = root  # bfcl-eval creates folders under it when imported
        try:
            loaded = load_bfcl_modules("bfcl_eval.model_handler.utils")
            if loaded is None:
                pytest.skip("bfcl-eval is not installed")
            from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call

            yield loaded[0], execute_multi_turn_func_call
        finally:
            if old is None:
                os.environ.pop("BFCL_PROJECT_ROOT", None)
            else:
                os.environ["BFCL_PROJECT_ROOT"] = old


# --------------------------------------------------------------------------- 1. scores

def test_ground_truth_scores_every_episode_in_every_call_mode_and_prose_none(
        tmp_path: Path, base: list[Conversation]) -> None:
    variants = [PROMPT, NATIVE, CONSTRAINED, CONSTRAINED_JSON]
    summary = run_conversations(variants, base, models=[GT, "fake/prose"], run_dir=tmp_path)
    n = len(variants) * len(base)
    assert (summary.episodes, summary.finished, summary.errors, summary.skipped) == (2 * n, 2 * n, 0, 0)
    assert summary.valid == n
    assert summary.steps_stored == 0 and summary.steps_sent == sum(r.sent for r in summary.results)
    turns = {c.id: len(c.turns) for c in base}
    truth = [r for r in summary.results if r.model == GT]
    prose = [r for r in summary.results if r.model == "fake/prose"]
    assert len(truth) == len(prose) == n
    assert {(r.variant_id, r.conversation_id) for r in truth} == {(v.id, c.id) for v in variants for c in base}
    for r in truth:
        assert (r.valid, r.failure_mode, r.error) == (True, None, None), (r.variant_id, r.conversation_id)
        assert len(r.turns) == turns[r.conversation_id] and all(t.valid for t in r.turns)
        assert r.steps == r.sent > len(r.turns)  # calls, then an answer that ends the turn
    for r in prose:
        assert (r.valid, r.failure_mode, r.error) == (False, "missing_call", None), (r.variant_id, r.conversation_id)
        assert r.steps == len(r.turns) == turns[r.conversation_id]  # one answer per turn, no calls
    stored = ConversationRun(tmp_path).episodes()
    assert outcomes(stored) == outcomes(summary.results)


def test_ground_truth_scores_the_other_multi_turn_categories(tmp_path: Path) -> None:
    miss_func = load_conversations("bfcl:multi_turn_miss_func", limit=2)
    others = (load_conversations("bfcl:multi_turn_miss_param", limit=2)
              + load_conversations("bfcl:multi_turn_long_context", limit=2))
    assert all(c.held_out_functions for c in miss_func) and all(c.long_context for c in others[2:])
    recorder = Recorder()
    summary = run_conversations([PROMPT, NATIVE], miss_func, models=[GT], run_dir=tmp_path / "miss_func",
                                clients={GT: recorder})
    summary_others = run_conversations([PROMPT], others, models=[GT], run_dir=tmp_path / "others")
    assert recorder.closed
    for s, count in ((summary, 2 * len(miss_func)), (summary_others, len(others))):
        assert (s.episodes, s.finished, s.valid, s.errors) == (count, count, count, 0)
        assert all(r.valid is True and r.failure_mode is None for r in s.results)

    for conversation in miss_func:
        (turn, added), = conversation.held_out_functions.items()
        names = {str(doc["name"]) for doc in added}
        assert not conversation.turns[turn]  # the data has no user message there
        for variant in (PROMPT, NATIVE):
            sent = recorder.requests(variant, conversation.id)
            at_turn = [s for s in sent if s[2].turn == turn and s[2].step == 0]
            assert len(at_turn) == 1
            messages, request, _, _ = at_turn[0]
            last = messages[-1]
            assert last["role"] == "user" and last["content"].endswith(ADDITIONAL_FUNCTIONS_PROMPT)
            assert last["content"].endswith(
                "I have updated some more functions you can choose from. What about now?")
            if variant.call_mode.value == "native":
                assert last["content"] == ADDITIONAL_FUNCTIONS_PROMPT
                before = [s for s in sent if s[2].turn < turn]
                assert before and all(not names & set(s[1]["tool_names"].values()) for s in before)
                assert names <= set(request["tool_names"].values())
                assert len(request["tools"]) == len(before[0][1]["tools"]) + len(names)
            else:
                # bfcl-eval's form for its default prompt: the Python str of the docs given back, then the sentence
                assert last["content"] == f"{[dict(doc) for doc in added]}\n{ADDITIONAL_FUNCTIONS_PROMPT}"
                for name in names:
                    assert f'"{name}"' not in messages[0]["content"]  # held out of the first system prompt
                assert request is None


# --------------------------------------------------------------------------- 2. messages

def test_messages_sent_step_by_step_equal_bfcl_eval_and_native_tool_messages(
        tmp_path: Path, base: list[Conversation], bfcl_reference: tuple[Any, Any]) -> None:
    model_utils, execute = bfcl_reference
    conversation = base[0]
    recorder = Recorder()
    summary = run_conversations([PROMPT, NATIVE], [conversation], models=[GT], run_dir=tmp_path,
                                clients={GT: recorder})
    assert summary.valid == 2

    # Prompt mode: the first request is bfcl-eval's; every later one adds the answer, then the results message
    # bfcl-eval's handler makes (its decoder, its executor, its formatter), or the next turn's user messages.
    sent = recorder.requests(PROMPT, conversation.id)
    assert sent[0][0] == [dict(m) for m in first_turn_messages(conversation)]
    assert sent[0][1] is None and (sent[0][2].turn, sent[0][2].step) == (0, 0)
    bfcl_model = f"promptgrid_test_{uuid.uuid4().hex}"
    results_by_step: dict[tuple[int, int], list[str]] = {}
    checked = 0
    for (previous, _, context, completion), (messages, _, next_context, _) in pairwise(sent):
        assert messages[: len(previous)] == previous
        assert messages[len(previous)] == {"role": "assistant", "content": completion.text}
        added = messages[len(previous) + 1:]
        if next_context.turn == context.turn:
            assert next_context.step == context.step + 1
            decoded = model_utils.default_decode_execute_prompting(completion.text)
            results, _ = execute(decoded, copy.deepcopy(conversation.initial_config),
                                 list(conversation.involved_classes), bfcl_model, conversation.id,
                                 long_context=conversation.long_context)
            expected = model_utils.format_execution_results_prompting({}, results,
                                                                      {"model_responses_decoded": decoded})
            assert [m["role"] for m in added] == ["user"]
            if expected != added[0]["content"]:  # only the call names' argument separator may differ (see below)
                assert normalized(added[0]["content"]) == normalized(expected)
            results_by_step[(context.turn, context.step)] = list(results)
            checked += 1
        else:
            assert (next_context.turn, next_context.step) == (context.turn + 1, 0)
            assert added == [dict(m) for m in conversation.turns[next_context.turn]]
    assert checked == sum(1 for calls in conversation.ground_truth if calls) >= 2
    first = results_by_step[(0, 0)]
    assert sent[1][0][-1]["content"].startswith("[{'role': 'tool', 'name': \"cd(folder='document')\", 'content': ")
    assert len(first) == len(conversation.ground_truth[0])

    # Native: the assistant message carries the tool calls (ids call_<turn>_<step>_<i>), each result follows as
    # a tool message with the matching id and the same text the prompt mode got.
    native = recorder.requests(NATIVE, conversation.id)
    assert native[0][0] == [dict(m) for m in first_turn_messages(conversation, NATIVE)]
    assert native[0][1] is not None and native[0][1]["tool_names"]
    native_checked = 0
    for (previous, _, context, completion), (messages, _, next_context, _) in pairwise(native):
        assert messages[: len(previous)] == previous
        assistant = messages[len(previous)]
        assert assistant["role"] == "assistant"
        added = messages[len(previous) + 1:]
        if next_context.turn != context.turn:
            assert "tool_calls" not in assistant
            assert added == [dict(m) for m in conversation.turns[next_context.turn]]
            continue
        calls = completion.tool_calls or ()
        assert calls
        ids = [f"call_{context.turn}_{context.step}_{i}" for i in range(len(calls))]
        assert [c["id"] for c in assistant["tool_calls"]] == ids
        assert [c["function"]["name"] for c in assistant["tool_calls"]] == [c["function"]["name"] for c in calls]
        assert [json.loads(c["function"]["arguments"]) for c in assistant["tool_calls"]] == \
            [json.loads(c["function"]["arguments"]) for c in calls]
        assert all(c["type"] == "function" for c in assistant["tool_calls"])
        assert [m["role"] for m in added] == ["tool"] * len(calls)
        assert [m["tool_call_id"] for m in added] == ids
        assert [m["content"] for m in added] == results_by_step[(context.turn, context.step)]
        native_checked += 1
    assert native_checked == checked


def test_the_results_message_is_byte_for_byte_bfcl_evals_for_a_call_with_two_arguments(
        tmp_path: Path, base: list[Conversation], bfcl_reference: tuple[Any, Any]) -> None:
    model_utils, execute = bfcl_reference
    conversation = base[0]  # turn 0: cd(folder=...), mkdir(dir_name=...), mv(source=..., destination=...)
    assert any(len(call.arguments) >= 2 for call in conversation.ground_truth[0])
    recorder = Recorder()
    run_conversations([PROMPT], [conversation], models=[GT], run_dir=tmp_path, clients={GT: recorder})
    (_, _, _, completion), (messages, _, _, _) = recorder.sent[:2]
    decoded = model_utils.default_decode_execute_prompting(completion.text)
    results, _ = execute(decoded, copy.deepcopy(conversation.initial_config), list(conversation.involved_classes),
                         f"promptgrid_test_{uuid.uuid4().hex}", conversation.id)
    expected = model_utils.format_execution_results_prompting({}, results, {"model_responses_decoded": decoded})
    assert messages[-1] == {"role": "user", "content": expected}


# --------------------------------------------------------------------------- 3. resume

RESUME_SCRIPT = """
import asyncio, os, sys
from pathlib import Path
from promptgrid.matrix.conversations import load_conversations
from promptgrid.matrix.running.conversation_runner import arun_episodes
from promptgrid.matrix.running.config import ModelSpec, RunConfig
from promptgrid.variants import Variant
conversations = load_conversations("bfcl:multi_turn_base", limit=2)

def kill_at(sent):
    if sent >= int(sys.argv[2]):
        os._exit(137)  # a kill: the step just sent is committed, nothing else happens

config = RunConfig(grid="", dataset="", models=(ModelSpec("fake/ground-truth", concurrency=4),),
                   run_dir=Path(sys.argv[1]), repeats=2)
asyncio.run(arun_episodes(config, [Variant(), Variant(call_mode="native")], conversations, on_sent=kill_at))
raise SystemExit(3)  # not reached: the run is killed after the steps
"""


def test_a_killed_run_resumes_without_resending_and_ends_with_the_same_verdicts(
        tmp_path: Path, base: list[Conversation]) -> None:
    killed_at = 7
    run_dir = tmp_path / "killed"
    proc = subprocess.run([sys.executable, "-c", RESUME_SCRIPT, str(run_dir), str(killed_at)], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 137, proc.stderr[-2000:]
    with conversation_store(run_dir) as store:
        assert store.step_count() == killed_at
        assert store.episodes() == []  # each episode takes 8 steps (4 turns, each calls then an end): none ended

    args = ([PROMPT, NATIVE], base[:2])
    kwargs: dict[str, Any] = dict(models=[GT], repeats=2)
    resumed = run_conversations(*args, run_dir=run_dir, **kwargs)
    fresh = run_conversations(*args, run_dir=tmp_path / "fresh", **kwargs)
    assert fresh.steps_stored == 0 and fresh.errors == 0 and fresh.valid == fresh.episodes == 8
    assert resumed.steps_sent + killed_at == fresh.steps_sent
    assert resumed.steps_stored == killed_at
    assert resumed.errors == 0 and resumed.skipped == 0 and resumed.finished == 8
    assert outcomes(resumed.results) == outcomes(fresh.results)
    assert sum(r.sent for r in resumed.results) == resumed.steps_sent
    assert [r.steps for r in sorted(resumed.results, key=outcome)] == \
        [r.steps for r in sorted(fresh.results, key=outcome)]
    assert any(0 < r.sent < r.steps for r in resumed.results)  # resumed mid-episode
    with conversation_store(run_dir) as store, conversation_store(tmp_path / "fresh") as other:
        assert store.step_count() == other.step_count() == fresh.steps_sent

    again = run_conversations(*args, run_dir=run_dir, **kwargs)
    assert (again.steps_sent, again.steps_stored, again.skipped, again.episodes) == (0, 0, 8, 8)
    assert outcomes(again.results) == outcomes(fresh.results)


# --------------------------------------------------------------------------- 4. hostile

def test_hostile_model_is_contained_and_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    canaries = (tmp_path / CANARY, Path("/tmp") / CANARY)
    assert not any(p.exists() for p in canaries)
    math = [c for c in load_conversations("bfcl:multi_turn_base") if "MathAPI" in c.involved_classes]
    chosen = [c for c in math if len(c.turns) >= 5][:1] + [c for c in math if len(c.turns) < 5][:1]
    assert len(chosen) == 2
    time_limit = 2.0
    summary = run_conversations([PROMPT, NATIVE], chosen, models=["fake/hostile"], run_dir=tmp_path / "run",
                                env_options={"time_limit_s": time_limit})
    assert (summary.episodes, summary.finished, summary.errors, summary.valid) == (4, 4, 0, 0)
    reasons: set[str] = set()
    modes: set[str | None] = set()
    for r in summary.results:
        assert r.valid is False and r.error is None
        assert len(r.turns) == len(next(c for c in chosen if c.id == r.conversation_id).turns)
        env = r.details["environment"]
        assert env["slowest_step_s"] < time_limit + 3.0, r
        assert 0 < env["peak_memory_mb"] < 512, r
        for turn in r.details["verdict"]["turns"]:
            reasons |= {item["reason"] for item in turn["details"].get("refused", [])}
            modes.add(turn.get("failure_mode"))
    assert {"private_name", "time_limit"} <= reasons, reasons
    assert "decode_failure" in modes
    assert not any(p.exists() for p in canaries)
    assert sorted(os.listdir(tmp_path)) == ["run"]
    assert "conversations.sqlite3" in os.listdir(tmp_path / "run")
    assert set(os.listdir(tmp_path / "run")) <= {"conversations.sqlite3", "conversations.sqlite3-wal",
                                                 "conversations.sqlite3-shm", "run.lock"}


# --------------------------------------------------------------------------- 5. refusals

@pytest.mark.parametrize("options", [{"batch": True}, {"goal": "best-worst"}, {"repeats": 0}, {"models": []}],
                         ids=["batch", "goal", "repeats", "no-models"])
def test_what_cannot_run_is_refused_before_anything_is_sent(
        tmp_path: Path, base: list[Conversation], options: dict[str, Any]) -> None:
    recorder = Recorder()
    kwargs: dict[str, Any] = {"models": [GT], "run_dir": tmp_path / "run", "clients": {GT: recorder}, **options}
    with pytest.raises(RunError) as info:
        run_conversations([PROMPT], base[:1], **kwargs)
    assert recorder.sent == []
    assert not (tmp_path / "run" / "conversations.sqlite3").exists()
    if "batch" in options:
        assert "batch" in str(info.value)
    if "goal" in options:
        assert "best-worst" in str(info.value)


def test_the_cli_refuses_batch_for_a_model_without_a_batch_api_with_exit_2(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "promptgrid.matrix.cli", "run", "call_modes", "--dataset",
                           "bfcl:multi_turn_base", "--model", GT, "--limit", "1", "--batch", "--run-dir",
                           str(run_dir)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr[-2000:])
    assert "promptgrid: error:" in proc.stderr and "batch" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not (run_dir / "conversations.sqlite3").exists()


# --------------------------------------------------------------------------- 6. CLI and datasets

def test_cli_run_then_report_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir, out = tmp_path / "run", tmp_path / "report"
    assert main(["run", "call_modes", "--dataset", "bfcl:multi_turn_base", "--model", GT, "--limit", "2",
                 "--repeats", "2", "--run-dir", str(run_dir)]) == 0
    printed = capsys.readouterr()
    assert "episodes" in printed.out and "0 ended in an error" in printed.out
    assert main(["report", str(run_dir), "--format", "json", "--out", str(out)]) == 0
    capsys.readouterr()
    data = json.loads((out / "conversations.json").read_text(encoding="utf-8"))
    assert set(data["pass_k_names"].values()) == {TAU_BENCH_PASS_K, TICKET_BENCH_PASS_K}
    assert data["k"] == 2 and data["unfinished"] == 0
    assert data["episodes"] == data["finished"] == 2 * 2 * len(data["variants"]) > 0
    (model,) = data["models"]
    assert model["model"] == GT and model["accuracy"] == 1.0
    assert model["pass_k_tau"]["value"] == model["pass_k_ticket"]["value"] == 1.0
    assert {v["call_mode"] for v in data["variants"]} >= {"prompt", "native", "constrained"}
    assert not (out / "report.html").exists()


def test_conversation_datasets_are_recognised(tmp_path: Path, base: list[Conversation]) -> None:
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(conversation_to_record(base[1])) + "\n", encoding="utf-8")
    assert is_conversation_dataset("bfcl:multi_turn_base")
    assert is_conversation_dataset("bfcl:multi_turn_miss_func")
    assert is_conversation_dataset(f"jsonl:{path}")
    assert not is_conversation_dataset("mini")
    assert not is_conversation_dataset("bfcl:simple_python")
    assert not is_conversation_dataset(f"jsonl:{tmp_path / 'missing.jsonl'}")
    single = tmp_path / "single.jsonl"
    single.write_text(json.dumps({"id": "x", "turns": [[{"role": "user", "content": "hi"}]], "functions": []}) + "\n",
                      encoding="utf-8")
    assert not is_conversation_dataset(f"jsonl:{single}")
    (loaded,) = load_conversations(f"jsonl:{path}")
    summary = run_conversations([PROMPT], [loaded], models=[GT], run_dir=tmp_path / "run")
    assert (summary.episodes, summary.valid, summary.errors) == (1, 1, 0)


# --------------------------------------------------------------------------- 7. failing calls

def test_a_fatal_error_ends_every_episode_as_an_error_counted_failed_and_retry_errors_plays_them_again(
        tmp_path: Path, base: list[Conversation]) -> None:
    client = Failing(ErrorKind.BAD_REQUEST)  # fatal for its call; an auth error stops the model (test_guarantees)
    summary = run_conversations([PROMPT, NATIVE], base[:2], models=[GT], run_dir=tmp_path, clients={GT: client})
    # As a single-turn call's error: stored, counted as failed (finished, not valid), not left unfinished.
    assert (summary.episodes, summary.errors, summary.finished, summary.valid, summary.steps_sent) == (4, 4, 4, 0, 0)
    assert (summary.steps_failed, summary.attempts) == (4, 4)  # sent, failed for good: requests all the same
    assert not summary.halted and summary.not_run == 0 and summary.unfinished == 0
    for r in summary.results:
        assert r.valid is False and r.status == "error" and r.scored and not r.correct
        assert r.error is not None and "bad key" in r.error and r.error.startswith("turn 0, step 0")
        assert r.turns == () and r.failure_mode is None and r.details["error_kind"] == "bad_request"
        row = r.row()
        assert (row.status, row.valid, row.error_kind, row.scored, row.correct) == (
            "error", False, "bad_request", True, False)
        assert row.error == r.error and row.message == ""
    assert set(client.attempts.values()) == {1}  # fatal: never retried
    with conversation_store(tmp_path) as store:
        assert store.step_count() == 0
        assert [r.valid for r in store.episodes()] == [False] * 4
    import promptgrid as pg

    (row,) = pg.status(tmp_path).to_dict()["models"]
    assert (row["finished"], row["valid"], row["errors"], row["unfinished"]) == (4, 0, 4, 0)
    # A plain re-run keeps the errors (nothing is sent) ...
    idle = Failing(ErrorKind.BAD_REQUEST)
    later = run_conversations([PROMPT, NATIVE], base[:2], models=[GT], run_dir=tmp_path, clients={GT: idle})
    assert (later.skipped, later.finished, later.valid, later.errors, later.errors_stored) == (4, 4, 0, 4, 4)
    assert idle.attempts == {}
    # ... and --retry-errors plays them again.
    again = run_conversations([PROMPT, NATIVE], base[:2], models=[GT], run_dir=tmp_path, retry_errors=True)
    assert (again.skipped, again.finished, again.valid, again.errors) == (0, 4, 4, 0)


def test_an_episode_a_store_kept_with_an_error_and_no_verdict_is_resumed(
        tmp_path: Path, base: list[Conversation]) -> None:
    """A store written before errors were results holds an errored episode as ``valid`` None: it is pending, and
    the next run plays it (as that release's next run would have)."""

    summary = run_conversations([PROMPT], base[:1], models=[GT], run_dir=tmp_path,
                                clients={GT: Failing(ErrorKind.BAD_REQUEST)})
    (errored,) = summary.results
    old = errored.episode_with(valid=None, details={"environment": {}})
    with conversation_store(tmp_path, readonly=False) as store:
        store.add_episode(old)
        (stored,) = store.episodes()
    assert stored.status == "pending" and not stored.scored
    later = run_conversations([PROMPT], base[:1], models=[GT], run_dir=tmp_path)
    assert (later.skipped, later.finished, later.valid) == (0, 1, 1)


def test_a_long_wait_before_a_step_s_next_try_has_its_own_progress_line(tmp_path: Path,
                                                                       base: list[Conversation]) -> None:
    """A rate-limited step that waits a second or more says so, naming the step, the server's Retry-After and the
    wait (a single-turn run's progress line shows such a wait too); a short backoff prints nothing. The sleep is
    recorded, not waited."""
    import io

    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def fake_sleep(delay: float, *args: Any, **kwargs: Any) -> Any:
        waits.append(delay)
        return await real_sleep(0)

    out = {}
    for name, retry_after in (("long", 3.0), ("short", 0.01)):
        log = io.StringIO()
        client = Failing(ErrorKind.RATE_LIMIT, failures=1, retry_after=retry_after, message="slow down")
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("promptgrid.matrix.running.sending.asyncio.sleep", fake_sleep)
            summary = run_conversations([PROMPT], base[:1], models=[GT], run_dir=tmp_path / name,
                                        clients={GT: client}, progress=log)
        assert (summary.finished, summary.valid) == (1, 1)
        out[name] = [line for line in log.getvalue().splitlines() if "next try in" in line]
    steps = summary.steps_sent
    assert len(out["long"]) == steps and out["short"] == []
    # The wait is the Retry-After and a little jitter (``RetryPolicy.delay``: at most 0.35 s here).
    first = re.fullmatch(rf"  {GT} \| {re.escape(PROMPT.label)} \| {base[0].id} \| turn 0, step 0: rate limited by "
                         rf"{GT} \(Retry-After 3 s\): next try in (3\.\d) s", out["long"][0])
    assert first is not None and float(first.group(1)) <= 3.4
    assert len([w for w in waits if 3.0 <= w <= 3.35]) == steps


def test_a_retryable_error_is_retried_and_the_episode_finishes(tmp_path: Path, base: list[Conversation]) -> None:
    client = Failing(ErrorKind.SERVER, failures=1)
    summary = run_conversations([PROMPT], base[:1], models=[GT], run_dir=tmp_path / "once", clients={GT: client})
    assert (summary.finished, summary.valid, summary.errors) == (1, 1, 0)
    assert set(client.attempts.values()) == {2} and len(client.attempts) == summary.steps_sent

    # Without retry_after, the run's backoff is waited (here 0.5 s, then doubling, with full jitter: a wait within
    # each window): the sleep is recorded, not waited.
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def fake_sleep(delay: float, *args: Any, **kwargs: Any) -> Any:
        waits.append(delay)
        return await real_sleep(0)

    client = Failing(ErrorKind.SERVER, failures=2, retry_after=None)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("promptgrid.matrix.running.sending.asyncio.sleep", fake_sleep)
        summary = run_conversations([PROMPT], base[:1], models=[GT], run_dir=tmp_path / "twice",
                                    clients={GT: client}, retries=2)
    assert (summary.finished, summary.valid, summary.errors) == (1, 1, 0)
    assert 0 <= waits[0] <= 0.5 and 0 <= waits[1] <= 1.0 and len(waits) == 2 * summary.steps_sent

    client = Failing(ErrorKind.SERVER, retry_after=0.01, message="overloaded")
    summary = run_conversations([PROMPT], base[:2], models=[GT], run_dir=tmp_path / "always", clients={GT: client},
                                retries=2)
    assert (summary.episodes, summary.errors, summary.finished, summary.valid) == (2, 2, 2, 0)
    assert all(r.status == "error" and r.details["error_kind"] == "server" and "overloaded" in (r.error or "")
               for r in summary.results)
    assert sorted(client.attempts.values()) == [3, 3]  # first try and 2 retries of each episode's first step


def test_a_call_past_its_timeout_is_retried(tmp_path: Path, base: list[Conversation]) -> None:
    class Slow(Recorder):
        async def complete(self, messages: Any, params: Mapping[str, Any], *,
                           request: Mapping[str, Any] | None = None,
                           episode: EpisodeContext | None = None) -> Completion:
            self.calls = getattr(self, "calls", 0) + 1
            if self.calls == 1:
                await asyncio.sleep(30)
            return await super().complete(messages, params, request=request, episode=episode)

    client = Slow()
    summary = run_conversations([PROMPT], base[:1], models=[GT], run_dir=tmp_path, clients={GT: client},
                                timeouts={GT: 0.2})
    assert (summary.finished, summary.valid, summary.errors) == (1, 1, 0)
    assert client.calls == summary.steps_sent + 1
    client = Slow()
    summary = run_conversations([PROMPT], base[:1], models=[GT], run_dir=tmp_path / "none", clients={GT: client},
                                timeouts={GT: 0.2}, retries=0)
    assert summary.errors == 1 and "timeout" in (summary.results[0].error or "")


def test_render_conversation_shows_the_whole_ground_truth_trajectory(base: list[Conversation]) -> None:
    from promptgrid.matrix.conversations import first_turn_messages, render_conversation

    conversation = base[0]
    messages, request = render_conversation(conversation, PROMPT)
    first = list(first_turn_messages(conversation))
    assert messages[:len(first)] == first
    assert request is None
    users = [m["content"] for m in messages if m["role"] == "user"]
    for turn in conversation.turns:  # every user turn is in the conversation, in order
        for message in turn:
            assert message["content"] in users
    results = [m["content"] for m in messages if m["role"] == "user" and m["content"].startswith("[{'role': 'tool'")]
    assert len(results) == sum(1 for turn in conversation.ground_truth if turn)
    assert messages[-1] == {"role": "assistant", "content": "I have done what you asked."}

    native, tools = render_conversation(conversation, NATIVE)
    assert tools is not None and tools["call_mode"] == "native"
    calls = [c for m in native if m.get("tool_calls") for c in m["tool_calls"]]
    assert [m["tool_call_id"] for m in native if m["role"] == "tool"] == [c["id"] for c in calls]


def test_cli_render_of_a_conversation_dataset(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "call_modes", "--dataset", "bfcl:multi_turn_base", "--case", "multi_turn_base_3",
                 "--variant", "native", "--jsonl"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    record = json.loads(line)
    assert record["case_id"] == "multi_turn_base_3" and record["trajectory"] == "ground_truth"
    assert record["tools"] and any(m["role"] == "tool" for m in record["messages"])


def test_cli_export_of_a_conversation_run_writes_one_line_per_episode(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    assert main(["run", "call_modes", "--dataset", "bfcl:multi_turn_base", "--model", GT, "--limit", "1",
                 "--variant", "native", "--repeats", "2", "--run-dir", str(run_dir), "--no-progress"]) == 0
    out = tmp_path / "episodes.jsonl"
    assert main(["export", str(run_dir), "--output", str(out)]) == 0
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(e["repeat"], e["valid"]) for e in lines] == [(0, True), (1, True)]
    assert all(e["turns"] and e["details"]["verdict"]["valid"] for e in lines)


def test_cli_status_of_a_conversation_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    assert main(["run", "call_modes", "--dataset", "bfcl:multi_turn_base", "--model", "fake/prose", "--limit", "1",
                 "--variant", "native", "--run-dir", str(run_dir), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["status", str(run_dir), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["kind"] == "conversation" and status["steps_stored"] > 0
    assert status["models"] == [{"model": "fake/prose", "episodes": 1, "finished": 1, "valid": 0, "errors": 0,
                                 "unfinished": 0, "unsupported": 0}]


def test_export_batch_of_conversations_refuses_a_model_it_cannot_write_before_writing(tmp_path: Path) -> None:
    """Conversation rounds are exported (test_batch_rounds.py) for litellm models; a fake one runs online."""
    out = tmp_path / "batch.jsonl"
    assert main(["export-batch", str(tmp_path / "run"), "--grid", "call_modes", "--dataset", "bfcl:multi_turn_base",
                 "--model", GT, "-o", str(out)]) == 2
    assert not out.exists() and not (tmp_path / "run").exists()


def test_a_native_call_of_a_function_not_offered_yet_is_left_to_the_environment(tmp_path: Path) -> None:
    """multi_turn_miss_func_49's ground truth calls `tail` two turns before it is given back (bfcl-eval runs it)."""
    (conversation,) = [c for c in load_conversations("bfcl:multi_turn_miss_func") if c.id == "multi_turn_miss_func_49"]
    offered = {doc["name"] for doc in conversation.functions_at(1)}
    assert "tail" not in offered and "tail" in {call.name for call in conversation.ground_truth[1]}
    summary = run_conversations([NATIVE], [conversation], models=[GT], run_dir=tmp_path)
    assert [r.valid for r in summary.results] == [True]


def test_the_report_names_variants_by_their_grid_labels(tmp_path: Path) -> None:
    from promptgrid.matrix.api import open_conversation_run

    run_dir = tmp_path / "run"
    assert main(["run", "call_modes", "--dataset", "bfcl:multi_turn_base", "--model", GT, "--limit", "1",
                 "--variant", "native", "--variant", "json->json,False", "--run-dir", str(run_dir),
                 "--no-progress"]) == 0
    run = open_conversation_run(run_dir)
    assert set(run.labels().values()) == {"native", "json->json,False"}
    report = run.report()
    text = report.to_markdown() + report.console()
    assert "| native " in text and "json->json,False" in text
    assert "call_mode=native" not in text  # ids are in to_dict, not in the tables
    assert {v["variant_id"] for v in report.to_dict()["variants"]} == set(run.labels())


def test_recognising_a_conversation_file_reads_a_bounded_prefix(tmp_path: Path) -> None:
    from promptgrid.matrix.conversations import is_conversation_dataset

    assert not is_conversation_dataset("jsonl:/dev/zero")  # not a regular file: returns at once
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    assert not is_conversation_dataset(f"jsonl:{fifo}")  # no writer: opening it would block
    huge = tmp_path / "huge.jsonl"
    huge.write_bytes(b"x" * 9_000_000)  # one line past the sniffed prefix
    assert not is_conversation_dataset(f"jsonl:{huge}")
    blank = tmp_path / "blank.jsonl"
    blank.write_bytes(b"\n" * 5000)
    assert not is_conversation_dataset(f"jsonl:{blank}")
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage\n")
    assert not is_conversation_dataset(f"jsonl:{binary}")


def test_report_out_that_cannot_be_written_is_an_error_not_a_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    assert main(["run", "call_modes", "--dataset", "bfcl:multi_turn_base", "--model", "fake/prose", "--limit", "1",
                 "--variant", "native", "--run-dir", str(run_dir), "--no-progress"]) == 0
    a_file = tmp_path / "a_file"
    a_file.write_text("keep", encoding="utf-8")
    capsys.readouterr()
    assert main(["report", str(run_dir), "--format", "json", "--out", str(a_file)]) == 2
    assert "is a file" in capsys.readouterr().err and a_file.read_text(encoding="utf-8") == "keep"
    (tmp_path / "out" / "conversations.json").mkdir(parents=True)  # the file's name is taken by a directory
    assert main(["report", str(run_dir), "--format", "json", "--out", str(tmp_path / "out")]) == 2


def test_an_episode_error_is_stored_without_the_key(tmp_path: Path, base: list[Conversation],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-conversation-secret-12345"
    monkeypatch.setenv("OPENAI_API_KEY", secret)

    class Leaky:
        name = "leaky"

        async def complete(self, messages: Any, params: Any, *, request: Any = None) -> Completion:
            raise call_error(ErrorKind.AUTH, f"bad key {secret}")

        def unsupported(self, request: Any) -> None:
            return None

        async def aclose(self) -> None:
            return None

    summary = run_conversations([PROMPT], base[:1], models=["leaky"], run_dir=tmp_path, clients={"leaky": Leaky()})
    (result,) = summary.results
    assert result.valid is False and result.error and secret not in result.error
    assert secret not in (tmp_path / "conversations.sqlite3").read_bytes().decode("utf-8", "replace")


def test_a_conversation_run_retries_as_its_run_config_says(tmp_path: Path, base: list[Conversation]) -> None:
    """The engine's retry policy is the run's (``RunConfig.retry_policy()``: ``max_retries``, the backoff and the
    Retry-After cap), not one of its own."""
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def fake_sleep(delay: float, *args: Any, **kwargs: Any) -> Any:
        waits.append(delay)
        return await real_sleep(0)

    def run(client: Failing, name: str, **fields: Any) -> Any:
        waits.clear()
        return run_conversations([PROMPT], base[:1], models=[GT], run_dir=tmp_path / name, clients={GT: client},
                                 **fields)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("promptgrid.matrix.running.sending.asyncio.sleep", fake_sleep)
        # A Retry-After is waited (never less), cut to the run's retry_after_cap.
        client = Failing(ErrorKind.RATE_LIMIT, failures=1, retry_after=7.0)
        summary = run(client, "after", max_retries=1, backoff_base_s=0.1, backoff_max_s=0.1, retry_after_cap=5.0)
        assert (summary.finished, summary.valid, summary.errors) == (1, 1, 0)
        assert waits == [5.0] * summary.steps_sent
        # max_retries bounds the attempts; each wait is within the backoff's window (full jitter).
        client = Failing(ErrorKind.SERVER, retry_after=None, message="overloaded")
        summary = run(client, "bounded", max_retries=2, backoff_base_s=0.25, backoff_max_s=0.3)
        assert summary.errors == 1 and "overloaded" in (summary.results[0].error or "")
        assert list(client.attempts.values()) == [3] and len(waits) == 2
        assert (summary.steps_failed, summary.attempts) == (1, 3)
        assert 0 <= waits[0] <= 0.25 and 0 <= waits[1] <= 0.3
        # A malformed answer is sent again at most the policy's malformed_attempts (2) times in all.
        client = Failing(ErrorKind.MALFORMED, retry_after=None)
        summary = run(client, "malformed", max_retries=4, backoff_base_s=0.0)
        assert summary.errors == 1 and list(client.attempts.values()) == [2] and waits == [0.0]


def test_progress_lines_escape_control_characters(tmp_path: Path, base: list[Conversation]) -> None:
    import dataclasses
    import io

    conversation = dataclasses.replace(base[0], id="evil\x1b[31m\nid")
    variant = Variant(given_label="lab\x1b]0;title\x07el")
    out = io.StringIO()
    summary = run_conversations([variant], [conversation], models=[GT], run_dir=tmp_path, progress=out,
                                clients={GT: Failing(ErrorKind.AUTH, message="bad\x1b[2J key\nsecond line")})
    assert summary.errors == 1
    text = out.getvalue()
    assert "\x1b" not in text and "\x07" not in text and text.count("\n") == 1  # one line, nothing a terminal runs
    assert "evil\\x1b[31m\\nid" in text and "lab\\x1b]0;title\\x07el" in text and "bad\\x1b[2J key\\nsecond" in text
    with conversation_store(tmp_path) as store:  # the store keeps the id as the dataset wrote it
        assert [e.conversation_id for e in store.episodes()] == ["evil\x1b[31m\nid"]


def test_recognising_stops_at_the_prefix_bound_however_the_blank_lines_are_cut(
        tmp_path: Path, base: list[Conversation], monkeypatch: pytest.MonkeyPatch) -> None:
    # The prefix bound is the line bound plus 1 MB of blank lines: a 6 MB line bound makes it 7 MB here.
    monkeypatch.setenv("PROMPTGRID_MAX_LINE_BYTES", str(6_000_000))
    record = (json.dumps(conversation_to_record(base[0])) + "\n").encode("utf-8")
    near = tmp_path / "near.jsonl"
    near.write_bytes(b" \n" * 100 + record)
    assert is_conversation_dataset(f"jsonl:{near}")
    far = tmp_path / "far.jsonl"
    far.write_bytes((b" " * 5_000_000 + b"\n") * 2 + record)  # each blank line under the bound, both over it
    assert not is_conversation_dataset(f"jsonl:{far}")


def test_run_dry_run_and_render_select_conversations_alike(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from promptgrid.matrix.cli import main

    base = ["bfcl_v4", "--dataset", "bfcl:multi_turn_base", "--model", GT, "--variant", "python->python,False"]
    assert main(["run", *base, "--case", "multi_turn_base_3", "--case", "multi_turn_base_7", "--dry-run",
                 "--run-dir", str(tmp_path / "r")]) == 0
    assert "2 conversation(s)" in capsys.readouterr().out
    for command in (["run", *base, "--dry-run", "--run-dir", str(tmp_path / "r")],
                    ["render", "bfcl_v4", "--dataset", "bfcl:multi_turn_base", "--variant", "python->python,False"]):
        assert main([*command, "--case", "multi_turn_base_3x"]) == 2  # a typo is an error naming the id
        err = capsys.readouterr().err
        assert "multi_turn_base_3x" in err and "did you mean 'multi_turn_base_3'" in err and "Traceback" not in err


def test_a_conversation_dry_run_estimates_steps_tokens_and_cost_as_a_single_turn_dry_run_does(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The steps a dry run counts are the ground truth's path: exactly what a run of ``fake/ground-truth`` sends;
    a paid model is priced from them; what is stored costs nothing; a model without tool support is not sent its
    native episodes; a missing key is named before the run."""
    from promptgrid.matrix.cli import main
    from promptgrid.matrix.running import estimate as estimate_module
    from promptgrid.matrix.running.conversation_reader import arun_conversation_config
    from promptgrid.matrix.running.session import build_config

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    run_dir = tmp_path / "run"
    config = build_config("call_modes", "bfcl:multi_turn_base", models=[GT, "openai/gpt-4o-mini"], limit=3,
                          repeats=2, run_dir=str(run_dir), params={"max_tokens": 100})
    from promptgrid.matrix.datasets._conversations import select_conversations
    from promptgrid.matrix.running.session import make_renderer
    from promptgrid.variants import load_grid

    grid = load_grid("call_modes")
    variants, conversations = grid.select(), select_conversations("bfcl:multi_turn_base", limit=3)
    before = estimate_module.estimate_conversations(config, variants, conversations, make_renderer(variants))
    truth, paid = before.models
    assert before.kind == "conversation" and before.played == len(variants) * 3
    assert truth.jobs == paid.jobs == len(variants) * 3 * 2 and truth.stored == 0
    assert paid.missing_env == ("OPENAI_API_KEY",) and truth.missing_env == ()
    assert paid.cost_input is not None and paid.cost_input > 0 and truth.cost_input == 0
    assert truth.input_tokens > truth.calls > 0 and truth.output_tokens_max == 100 * truth.calls
    # litellm's openai model is not sent a grammar: those constrained episodes are out, whole variants of them.
    assert 0 < paid.unsupported < paid.jobs and paid.unsupported % (3 * 2) == 0 and truth.unsupported == 0
    from support.fake_server import FakeScript, FakeServer

    with FakeServer.thread(FakeScript()) as server:  # the same model, run: as many episodes unsupported
        served = build_config("call_modes", "bfcl:multi_turn_base", models=["openai/gpt-4o-mini"], limit=3,
                              repeats=2, run_dir=str(tmp_path / "served"), api_base=server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        assert asyncio.run(arun_conversation_config(served)).unsupported == paid.unsupported
    monkeypatch.delenv("OPENAI_API_KEY")

    ground_truth_only = build_config("call_modes", "bfcl:multi_turn_base", models=[GT], limit=3, repeats=2,
                                     run_dir=str(run_dir))
    summary = asyncio.run(arun_conversation_config(ground_truth_only))
    assert summary.steps_sent == truth.calls  # the ground truth's path, step for step

    after = estimate_module.estimate_conversations(config, variants, conversations, make_renderer(variants))
    assert (after.models[0].stored, after.models[0].calls, after.models[0].cost_input) == (truth.jobs, 0, 0.0)
    assert after.models[1] == paid  # the other model's episodes are still to run
    monkeypatch.setattr(estimate_module, "DRY_RUN_PAIRS", 5)  # a larger plan: an even spread, scaled to the plan
    sampled = estimate_module.estimate_conversations(config, variants, conversations, make_renderer(variants))
    assert sampled.played == 5 and sampled.models[1].jobs == paid.jobs
    assert abs(sampled.models[1].calls - paid.calls) <= paid.calls / 2

    assert main(["run", "call_modes", "--dataset", "bfcl:multi_turn_base", "--model", "openai/gpt-4o-mini",
                 "--limit", "3", "--dry-run", "--run-dir", str(tmp_path / "dry")]) == 0
    out = capsys.readouterr().out
    assert "steps to send" in out and "ground truth's path" in out and "credentials not set: OPENAI_API_KEY" in out
    assert not (tmp_path / "dry").exists()  # a dry run writes nothing


def test_export_to_dash_is_standard_output_and_a_store_is_never_overwritten(
        tmp_path: Path, base: list[Conversation], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from promptgrid.matrix.cli import main

    run_dir = tmp_path / "run"
    run_conversations([PROMPT], base[:1], models=[GT], run_dir=run_dir)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["export", str(run_dir), "--output", "-"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line)["conversation_id"] == base[0].id and not (tmp_path / "-").exists()
    store = run_dir / "conversations.sqlite3"
    before = store.read_bytes()
    assert main(["export", str(run_dir), "--output", str(store)]) == 2
    assert store.read_bytes() == before


# --------------------------------------------------------------------------- 8. independent samples, keys, plan

class FakeEnv:
    """An environment without a worker: every call gives ``"ok"``, the state is empty. ``broken(initial_config,
    where)`` says where it fails with ``EnvironmentFailure`` (``"start"``, ``"run"``, ``"state"`` or None)."""

    def __init__(self, classes: Any, initial_config: Any, *, broken: Any, **_options: Any) -> None:
        self.where = broken(initial_config)
        if self.where == "start":
            raise EnvironmentFailure("the worker could not be started again (test)", "worker_failed")
        self.ran = 0

    def run(self, calls: Any) -> list[Any]:
        if self.where == "run":
            raise EnvironmentFailure("out of memory (test)", "out_of_memory")
        from promptgrid.matrix.episodes._environment import CallOutcome

        self.ran += len(calls)
        return [CallOutcome(call, True, "ok") for call in calls]

    def state(self) -> dict[str, dict[str, Any]]:
        if self.where == "state":
            raise EnvironmentFailure("could not report its state (test)", "state_too_large")
        return {}

    def usage(self) -> Any:
        from promptgrid.matrix.episodes._environment import EnvironmentUsage

        return EnvironmentUsage(1, 0.0, self.ran, 0, 1.0, {})

    def close(self) -> None:
        pass


def fake_envs(bad: Conversation | None, where: str | None) -> Any:
    def make(classes: Any, initial_config: Any, **options: Any) -> FakeEnv:
        return FakeEnv(classes, initial_config, broken=lambda config: where if bad is not None
                       and config == bad.initial_config else None, **options)
    return make


@pytest.mark.parametrize("where", ["start", "run", "state"])
def test_an_environment_failure_ends_its_episode_only_and_a_rerun_sends_nothing_for_it(
        tmp_path: Path, base: list[Conversation], where: str) -> None:
    assert len({json.dumps(c.initial_config, sort_keys=True) for c in base}) == 3
    bad = base[1]
    progress = tmp_path / "progress.txt"
    with progress.open("w", encoding="utf-8") as stream:
        summary = run_conversations([PROMPT, NATIVE], base, models=[GT], run_dir=tmp_path / "run",
                                    make_env=fake_envs(bad, where), progress=stream)
    assert (summary.episodes, summary.finished, summary.errors) == (6, 6, 0)
    assert (summary.valid, summary.environment_failures) == (4, 2)
    failed = [r for r in summary.results if r.failure_mode == "environment_failure"]
    assert {r.conversation_id for r in failed} == {bad.id} and all(r.valid is False for r in failed)
    for r in failed:
        why = r.details["environment_failure"]
        assert why["reason"] == {"start": "worker_failed", "run": "out_of_memory", "state": "state_too_large"}[where]
        assert (why["turn"], why["step"]) == ((None, None) if where == "state" else (0, 0))
        for part in (bad.id, r.variant_id, GT, "(test)", "while scoring" if where == "state" else "turn 0, step 0"):
            assert part in why["detail"]
    lines = progress.read_text(encoding="utf-8").splitlines()
    assert sum("environment_failure" in line and bad.id in line for line in lines) == 2
    stored = ConversationRun(tmp_path / "run").episodes()
    assert outcomes(stored) == outcomes(summary.results)
    run = ConversationRun(tmp_path / "run")
    report = run.report()
    modes = {m["mode"] for f in report.to_dict()["failure_modes"] for m in f["modes"]}
    assert modes == {"environment_failure"} and "environment_failure" in report.to_markdown()
    assert run.language_report() is not None

    recorder = Recorder()
    again = run_conversations([PROMPT, NATIVE], base, models=[GT], run_dir=tmp_path / "run",
                              make_env=fake_envs(bad, where), clients={GT: recorder})
    assert recorder.sent == [] and (again.skipped, again.steps_sent, again.environment_failures) == (6, 0, 2)


def test_the_cli_goes_on_past_an_environment_failure_and_names_it(
        tmp_path: Path, base: list[Conversation], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from promptgrid.matrix.running import conversation_runner as _run
    bad = next(c for c in load_conversations("bfcl:multi_turn_base", limit=2) if c.id == "multi_turn_base_1")
    monkeypatch.setattr(_run, "Environment", fake_envs(bad, "run"))
    args = ["run", "bfcl_v4", "--dataset", "bfcl:multi_turn_base", "--limit", "2", "--model", GT,
            "--variant", "python->python,False", "--run-dir", str(tmp_path / "run"), "--no-progress"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "1 ended by an environment failure" in out and "first environment failure" in out
    assert "multi_turn_base_1" in out and "out of memory (test)" in out
    assert main(args) == 0
    assert "0 steps sent" in capsys.readouterr().out


class Counting:
    """A client that answers every step in prose (ending the turn), counting what it is sent."""

    def __init__(self) -> None:
        self.name = "fake/counting"
        self.sent: list[list[dict[str, Any]]] = []

    async def complete(self, messages: Any, params: Mapping[str, Any], **_kwargs: Any) -> Completion:
        self.sent.append(copy.deepcopy(list(messages)))
        return Completion(text=f"Sample {len(self.sent)}.")

    async def aclose(self) -> None:
        pass


def test_identical_first_requests_of_two_cases_are_two_samples_unless_deduplicated(
        tmp_path: Path, base: list[Conversation]) -> None:
    import dataclasses

    twin = dataclasses.replace(base[0], id=base[0].id + "_twin")
    assert first_turn_messages(twin) == first_turn_messages(base[0])
    turns = len(base[0].turns)
    params = {"temperature": 0.7}
    client = Counting()
    summary = run_conversations([PROMPT], [base[0], twin], models=["fake/counting"], run_dir=tmp_path / "run",
                                clients={"fake/counting": client}, params=params, make_env=fake_envs(None, None))
    assert summary.steps_sent == len(client.sent) == 2 * turns and summary.steps_stored == 0
    firsts = [m for m in client.sent if len(m) == 2]
    assert len(firsts) == 2 and firsts[0] == firsts[1]  # the same bytes, sent once per case
    again = run_conversations([PROMPT], [base[0], twin], models=["fake/counting"], run_dir=tmp_path / "run",
                              clients={"fake/counting": client}, params=params, make_env=fake_envs(None, None))
    assert again.steps_sent == 0 and again.skipped == 2

    shared = Counting()
    deduped = run_conversations([PROMPT], [base[0], twin], models=["fake/counting"], run_dir=tmp_path / "dedupe",
                                clients={"fake/counting": shared}, params={"temperature": 0}, concurrency=1,
                                dedupe_requests=True, make_env=fake_envs(None, None))
    assert deduped.steps_sent == len(shared.sent) == turns and deduped.steps_stored == turns


def test_identical_requests_are_sent_per_case_over_http(tmp_path: Path, base: list[Conversation],
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Two conversations that open with the same bytes, at temperature 0.7, through litellm to the fake server:
    two requests per turn; with --dedupe-requests one."""
    from promptgrid.matrix.running import conversation_runner as _run
    from support.fake_server import FakeServer

    monkeypatch.setattr(_run, "Environment", fake_envs(None, None))
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-0000")
    path = tmp_path / "twins.jsonl"
    record = conversation_to_record(base[0])
    path.write_text("".join(json.dumps({**record, "id": f"twin_{i}"}) + "\n" for i in range(2)), encoding="utf-8")
    turns = len(base[0].turns)
    for dedupe, expected in ((False, 2 * turns), (True, turns)):
        with FakeServer.thread(answer_fn=lambda body: "I cannot help with that.") as srv:
            args = ["run", "bfcl_v4", "--dataset", f"jsonl:{path}", "--model", "openai/fake-model", "--api-base",
                    srv.url, "--variant", "python->python,False", "--temperature", "0.7" if not dedupe else "0",
                    "--concurrency", "1", "--run-dir", str(tmp_path / f"run_{dedupe}"), "--no-progress"]
            assert main(args + (["--dedupe-requests"] if dedupe else [])) == 0
            assert len(srv.requests()) == expected, dedupe
    capsys.readouterr()


def test_a_step_key_takes_each_message_once(base: list[Conversation], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The running hash: a conversation of N messages costs N message hashes in all, not one per message per
    step; and the keys do not change between runs (a resumed run finds them)."""
    from promptgrid.matrix.episodes import _conversation_play as _play
    hashed: list[Any] = []
    canonical = _play._canonical

    def counting(value: Any) -> bytes:
        hashed.append(value)
        return canonical(value)

    monkeypatch.setattr(_play, "_canonical", counting)
    recorder = Recorder()
    run_conversations([PROMPT], base[:1], models=[GT], run_dir=tmp_path / "a", clients={GT: recorder},
                      make_env=fake_envs(None, None))
    messages = [m for m in hashed if isinstance(m, dict) and "role" in m]
    last, _, _, completion = recorder.sent[-1]
    assert len(messages) == len(last) == len(recorder.sent) * 2  # each message once (prompt + answer pairs)
    keys = _play.StepKeys(("v", "c"))
    a = keys.digest([{"role": "user", "content": "x"}], None, 0, 0)
    again = _play.StepKeys(("v", "c"))
    assert again.digest([{"role": "user", "content": "x"}], None, 0, 0) == a
    assert _play.StepKeys(("v", "other")).digest([{"role": "user", "content": "x"}], None, 0, 0) != a
    assert _play.StepKeys(None).digest([{"role": "user", "content": "x"}], None, 0, 0) == \
        _play.StepKeys(None).digest([{"role": "user", "content": "x"}], None, 3, 1)


def test_a_store_from_before_the_episode_keys_resumes_without_sending(tmp_path: Path,
                                                                     base: list[Conversation]) -> None:
    """A run directory of the last release: its steps keyed by the request alone (``legacy_digest``), no ``step_keys``;
    a run into it finds every stored step and sends nothing."""
    from promptgrid.matrix.episodes._conversation_play import legacy_digest
    from promptgrid.matrix.running.plan import job_key, repeat_params
    from promptgrid.matrix.running.store_episodes import StoredStep

    recorder = Recorder()
    run_conversations([PROMPT, NATIVE], base[:1], models=[GT], run_dir=tmp_path / "new", clients={GT: recorder},
                      make_env=fake_envs(None, None))
    old = tmp_path / "old"
    params = repeat_params({}, 0)
    with conversation_store(old, create=True) as store:
        for messages, request, _context, completion in recorder.sent:
            from promptgrid.matrix.episodes._steps import stored_answer

            store.add_step(job_key(GT, params, legacy_digest(messages, request), 0), GT,
                           StoredStep(response=stored_answer(completion, _context.variant)))
        assert store.meta("step_keys") is None
    again = Recorder()
    summary = run_conversations([PROMPT, NATIVE], base[:1], models=[GT], run_dir=old, clients={GT: again},
                                make_env=fake_envs(None, None))
    assert again.sent == [] and summary.steps_sent == 0 and summary.steps_stored == len(recorder.sent)
    assert summary.valid == 2
    with conversation_store(tmp_path / "new") as store:
        assert store.meta("step_keys") == "episode-chain-1"


def test_max_jobs_counts_episodes_and_a_huge_plan_is_refused_before_anything_is_built(
        tmp_path: Path, base: list[Conversation], capsys: pytest.CaptureFixture[str]) -> None:
    recorder = Recorder()
    with pytest.raises(RunError) as info:
        run_conversations([PROMPT, NATIVE], base, models=[GT], repeats=3, run_dir=tmp_path / "run",
                          clients={GT: recorder}, max_jobs=2)
    assert "1 model x 2 variants x 3 conversations x 3 repeats = 18 episodes, over the cap of 2" in str(info.value)
    assert recorder.sent == [] and not (tmp_path / "run").exists()

    run_dir = tmp_path / "cli"
    common = ["run", "bfcl_v4", "--dataset", "bfcl:multi_turn_base", "--model", GT, "--run-dir", str(run_dir)]
    assert main([*common, "--limit", "3", "--variant", "python->python,False", "--max-jobs", "2"]) == 2
    err = capsys.readouterr().err
    assert "1 model x 1 variant x 3 conversations x 1 repeat = 3 episodes, over the cap of 2" in err
    assert "--max-jobs" in err and "Traceback" not in err
    assert main([*common, "--limit", "1", "--repeats", "4000000"]) == 2
    err = capsys.readouterr().err
    assert "4,000,000 repeats" in err and "over the cap of 5,000,000" in err and "Traceback" not in err
    assert main([*common, "--limit", "1", "--repeats", "4000000", "--dry-run"]) == 2
    assert "over the cap" in capsys.readouterr().err
    assert not (run_dir / "conversations.sqlite3").exists()


def test_whole_transcripts_are_byte_identical_to_bfcl_evals_prompting_handler_in_every_category() -> None:
    """benchmarks/multi_turn_transcripts.py on the first entries of each category (the benchmark runs all 200:
    200/200 in each). miss_func's entries give a function back at a later turn: that user message is bfcl-eval's
    (the Python str of the docs, then its sentence) for the default prompt."""
    pytest.importorskip("openai")
    from support.scripts import load_script

    bench = load_script("benchmarks/multi_turn_transcripts.py", "multi_turn_transcripts_benchmark")
    with bench.bfcl_environment():
        handler_class = bench.prompting_handler_class()
        results = [bench.compare(category, limit=2, handler_class=handler_class) for category in bench.CATEGORIES]
    assert [(r.category, r.identical, r.compared) for r in results] == \
        [(c, 2, 2) for c in ("base", "miss_func", "miss_param", "long_context")], [r.differences for r in results]


def test_strict_arguments_reach_every_environment_the_runner_makes(tmp_path: Path, base: list[Conversation],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from promptgrid.matrix.running import conversation_runner as _run
    seen: list[Any] = []

    def make(classes: Any, initial_config: Any, **options: Any) -> FakeEnv:
        seen.append(options.get("strict_arguments", False))
        return FakeEnv(classes, initial_config, broken=lambda config: None)

    summary = run_conversations([PROMPT], base[:1], models=[GT], run_dir=tmp_path / "strict", make_env=make,
                                strict_arguments=True)
    assert summary.valid == 1 and len(seen) >= 3 and all(seen)  # the episode's, the ground truth's, the check's
    seen.clear()
    run_conversations([PROMPT], base[:1], models=[GT], run_dir=tmp_path / "default", make_env=make)
    assert len(seen) >= 3 and not any(seen)
    monkeypatch.setattr(_run, "Environment", make)
    seen.clear()
    assert main(["run", "bfcl_v4", "--dataset", "bfcl:multi_turn_base", "--limit", "1", "--model", GT,
                 "--variant", "python->python,False", "--run-dir", str(tmp_path / "cli"), "--no-progress",
                 "--strict-arguments"]) == 0
    assert len(seen) >= 1 and seen[0] is True


def test_a_run_directory_keeps_the_argument_rule_it_was_scored_under(tmp_path: Path,
                                                                      base: list[Conversation]) -> None:
    summary = run_conversations([PROMPT], base[:1], models=[GT], run_dir=tmp_path)
    assert summary.valid == 1
    with pytest.raises(RunError, match="scored under the bfcl argument rule.*Run it without --strict-arguments"):
        run_conversations([PROMPT], base[:1], models=[GT], run_dir=tmp_path, strict_arguments=True)
    again = run_conversations([PROMPT], base[:1], models=[GT], run_dir=tmp_path)
    assert again.valid == 1 and again.steps_sent == 0


class EchoFlood:
    """A native model answering every step with 64 ``echo`` calls of 900 KB each (57.6 MB a step)."""

    takes_episode = True
    name = "flood"

    def __init__(self) -> None:
        self.sent = 0

    async def complete(self, messages: Any, params: Mapping[str, Any], *, request: Mapping[str, Any] | None = None,
                       episode: EpisodeContext | None = None) -> Completion:
        self.sent += 1
        arguments = json.dumps({"content": "x" * 900_000})
        calls = tuple({"id": f"c{i}", "type": "function", "function": {"name": "echo", "arguments": arguments}}
                      for i in range(64))
        return Completion("", tool_calls=calls)

    async def aclose(self) -> None:
        pass


def test_a_flood_of_huge_native_calls_is_bounded_in_the_store_and_the_transcript(
        tmp_path: Path, base: list[Conversation]) -> None:
    from promptgrid.matrix.episodes._steps import MAX_STORED_ANSWER_CHARS
    from promptgrid.matrix.running.store_episodes import CONVERSATION_STORE

    client = EchoFlood()
    summary = run_conversations([NATIVE], base[:1], models=["flood"], run_dir=tmp_path, clients={"flood": client},
                                step_limit=5)
    assert summary.finished == 1 and client.sent >= 5
    with sqlite3.connect(tmp_path / CONVERSATION_STORE) as db:
        sizes = [len(r) for (r,) in db.execute("SELECT response FROM calls")]
    db.close()
    assert sizes and max(sizes) <= MAX_STORED_ANSWER_CHARS + 10_000  # one call kept (900 KB), the rest dropped
    assert (tmp_path / CONVERSATION_STORE).stat().st_size < 3 * MAX_STORED_ANSWER_CHARS * len(sizes)
    raised = run_conversations([NATIVE], base[:1], models=["flood"], run_dir=tmp_path / "raised",
                               clients={"flood": EchoFlood()}, step_limit=1, max_answer_chars=3_000_000)
    assert raised.finished == 1
    with sqlite3.connect(tmp_path / "raised" / CONVERSATION_STORE) as db:
        kept = max(len(r) for (r,) in db.execute("SELECT response FROM calls"))
    db.close()
    assert 2_700_000 < kept <= 3_010_000  # the bound is raisable: three 900 KB calls kept


def test_a_slow_step_gets_its_own_progress_line(tmp_path: Path, base: list[Conversation],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from promptgrid.matrix.running import conversation_runner as _run
    monkeypatch.setattr(_run, "SLOW_STEP_S", 0.0)  # every step counts as slow
    stream = io.StringIO()
    run_conversations([PROMPT], base[:1], models=[GT], run_dir=tmp_path, progress=stream)
    lines = stream.getvalue().splitlines()
    steps = [line for line in lines if "turn 0, step 0: answered in" in line]
    assert steps and "multi_turn_base_0" in steps[0] and "steps sent so far" in steps[0]
    assert lines[-1].startswith("[1/1]")  # the episode's own line comes after its steps


def test_score_judges_a_conversation_run_again_from_its_stored_steps_without_a_call(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``promptgrid score RUN_DIR`` on a conversation run: every scored episode is played again from the store and
    judged again; nothing changes when nothing changed, a verdict damaged in the store is restored, and an episode
    whose steps are not all stored is named and left as it was."""
    import sqlite3

    from promptgrid.matrix.cli import main

    run_dir = tmp_path / "run"
    assert main(["run", "call_modes", "--dataset", "bfcl:multi_turn_base", "--model", "fake/noisy:3", "--limit", "4",
                 "--run-dir", str(run_dir), "--no-progress"]) in (0, 1)
    with conversation_store(run_dir) as store:
        before = [e.episode_dict() for e in store.episodes()]
    assert any(e["valid"] for e in before) and not all(e["valid"] for e in before)
    capsys.readouterr()
    assert main(["score", str(run_dir)]) == 0
    err = capsys.readouterr().err
    assert f"re-scored {len(before)} episodes from their stored steps (0 changed validity" in err, err
    with conversation_store(run_dir) as store:
        assert [e.episode_dict() for e in store.episodes()] == before  # played again to the same verdicts

    # Damaged verdicts (every failed episode stored as valid, as a checker bug would have judged them) are judged
    # again; so is a store written before the step limit was recorded.
    with conversation_store(run_dir, readonly=False) as store:
        failed = [e for e in store.episodes() if e.valid is False]
        for e in failed:
            store.add_episode(e.episode_with(valid=True, failure_mode=None))
        store.db.execute("DELETE FROM meta WHERE key = 'step_limit'")
    assert main(["score", str(run_dir)]) == 0
    assert f"({len(failed)} changed validity" in capsys.readouterr().err
    with conversation_store(run_dir) as store:
        assert [e.episode_dict() for e in store.episodes()] == before

    # A step the store does not have: the episode cannot be played again; it is named and kept as it was.
    with sqlite3.connect(run_dir / "conversations.sqlite3") as db:
        db.execute("DELETE FROM calls WHERE key = (SELECT key FROM calls ORDER BY finished_at DESC LIMIT 1)")
    assert main(["score", str(run_dir)]) == 1
    assert "1 could not be played again from the store" in capsys.readouterr().err
    with conversation_store(run_dir) as store:
        assert [e.episode_dict() for e in store.episodes()] == before


@pytest.mark.parametrize("recorded", [None, "20", True, -5, 0, 2.5, {"a": 1}, [3]])
def test_a_damaged_or_missing_step_limit_in_the_store_falls_back_to_what_the_verdicts_say(recorded: Any) -> None:
    """``score`` reads the run's step limit from the store's meta (untrusted: a damaged store may hold anything);
    what is not a whole number of at least 1 is not taken: a force-quit turn's steps say it, else the default."""
    import dataclasses

    from promptgrid.matrix.running.conversation_reader import _step_limit
    from promptgrid.matrix.scoring.state_check import MAXIMUM_STEP_LIMIT
    from support.episodes import made_turn

    quit_turn = dataclasses.replace(made_turn(0, False, "step_limit", steps=6), details={"steps": 6})
    force_quit = Result.episode(model="m", variant_id="v", conversation_id="c", category="multi_turn_base", repeat=0,
                                valid=False, turns=(quit_turn,))
    assert _step_limit(recorded, []) == MAXIMUM_STEP_LIMIT
    assert _step_limit(recorded, [force_quit]) == 5
    assert _step_limit(7, [force_quit]) == 7
