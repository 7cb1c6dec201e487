"""Environment: BFCL's API classes in a bounded worker, equal to bfcl-eval's own in-process execution.

The equivalence check runs every ground-truth call of ``multi_turn_base``
turn by turn through ``Environment`` and, beside it, on instances the test
creates itself from bfcl-eval's classes exactly as bfcl-eval's executor does
(``cls()``, ``_load_scenario(deepcopy(config), long_context=...)``), calling
each method by ``getattr`` (nothing is evaluated). Outputs must equal the text
bfcl-eval's executor makes of the results and the public state must be equal
after every turn. The hostile calls (private and dunder names, wrong types,
huge exponents, 10,000 calls in a step, deep nesting, paths of the real file
system) are refused or bounded, and the episode goes on.
"""

from __future__ import annotations

import copy
import gc
import importlib
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

from promptgrid.errors import DatasetError, MissingDependencyError, RunError
from promptgrid.matrix.conversations import (
    ENVIRONMENT_CLASSES,
    MAX_ARGUMENT_DEPTH,
    CallOutcome,
    Conversation,
    Environment,
    Refusal,
    ToolCall,
    functions_for,
    load_conversations,
)
from promptgrid.matrix.episodes import _environment as env_module
from promptgrid.matrix.episodes import _worker as worker_module
from promptgrid.matrix.episodes._environment import EnvironmentFailure

pytest.importorskip("bfcl_eval.eval_checker.multi_turn_eval.func_source_code.gorilla_file_system")

HAS_MPMATH = find_spec("mpmath") is not None
needs_mpmath = pytest.mark.skipif(not HAS_MPMATH, reason="bfcl-eval's MathAPI imports mpmath, which is not installed")
BACKEND = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code."
FILES = {"GorillaFileSystem": {"root": {"alice": {"type": "directory", "contents": {
    "notes.txt": {"type": "file", "content": "line one\nline two"},
    "docs": {"type": "directory", "contents": {}}}}}}}


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(name, arguments)


# --------------------------------------------------------------------------- bfcl-eval, in this process

def bfcl_text(result: Any) -> str:
    """The text bfcl-eval's execute_multi_turn_func_call gives the model for a method's return value."""
    if type(result) == str:  # noqa: E721 -- bfcl-eval's own test
        return result
    if type(result) == dict:  # noqa: E721
        try:
            return json.dumps(result)
        except Exception:
            return str(result)
    return str(result)


def plain(value: Any) -> Any:
    """An instance attribute as Environment.state() gives it: simulated files and folders by name and contents."""
    kind = type(value).__name__
    if kind == "Directory":
        return {"type": "directory", "name": value.name, "contents": {k: plain(v) for k, v in value.contents.items()}}
    if kind == "File":
        return {"type": "file", "name": value.name, "content": value.content}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


class InProcess:
    """bfcl-eval's instances for one conversation, created and called as its executor does (without eval)."""

    def __init__(self, conversation: Conversation) -> None:
        self.instances: dict[str, Any] = {}
        self.owner: dict[str, str] = {}
        for name in conversation.involved_classes:
            cls = getattr(importlib.import_module(BACKEND + ENVIRONMENT_CLASSES[name][0]), name)
            instance = cls()
            if name != "MathAPI":
                instance._load_scenario(copy.deepcopy(conversation.initial_config.get(name, {})),
                                        long_context=conversation.long_context)
            self.instances[name] = instance
            self.owner.update({member: name for member in dir(instance)
                               if not member.startswith("_") and callable(getattr(instance, member))})

    def run(self, tool_call: ToolCall) -> str:
        method = getattr(self.instances[self.owner[tool_call.name]], tool_call.name)
        try:
            return bfcl_text(method(**copy.deepcopy(dict(tool_call.arguments))))
        except Exception as exc:
            return f"Error during execution: {exc}"

    def state(self) -> dict[str, dict[str, Any]]:
        return {name: {key: plain(value) for key, value in vars(instance).items() if not key.startswith("_")}
                for name, instance in self.instances.items()}


@pytest.fixture(scope="module")
def base() -> list[Conversation]:
    conversations = load_conversations("bfcl:multi_turn_base")
    return [c for c in conversations if HAS_MPMATH or "MathAPI" not in c.involved_classes]


def assert_runs_as_in_bfcl_eval(conversations: list[Conversation]) -> int:
    calls = 0
    for conversation in conversations:
        reference = InProcess(conversation)
        with Environment(conversation.involved_classes, conversation.initial_config,
                         long_context=conversation.long_context) as env:
            for turn, expected in enumerate(conversation.ground_truth):
                outcomes = env.run(expected)
                assert [o.call for o in outcomes] == list(expected)
                for outcome in outcomes:
                    assert outcome.refused is None, (conversation.id, turn, outcome)
                    assert outcome.output == reference.run(outcome.call), (conversation.id, turn, outcome.call)
                calls += len(outcomes)
                assert env.state() == reference.state(), (conversation.id, turn)
    return calls


def test_ground_truth_runs_as_in_bfcl_eval_on_a_sample_of_every_class(base: list[Conversation]) -> None:
    sample = base[::10]
    assert {name for c in sample for name in c.involved_classes} >= set(ENVIRONMENT_CLASSES) - (
        set() if HAS_MPMATH else {"MathAPI"})
    assert assert_runs_as_in_bfcl_eval(sample) > 100


@pytest.mark.slow
def test_every_ground_truth_call_of_multi_turn_base_runs_as_in_bfcl_eval(base: list[Conversation]) -> None:
    assert len(base) == (200 if HAS_MPMATH else len(base))
    assert assert_runs_as_in_bfcl_eval(base) > 1000


def test_ticket_ids_may_be_strings_as_in_bfcl_evals_own_scenarios(base: list[Conversation]) -> None:
    """TicketAPI documents ticket_id as an integer; multi_turn_base_173's scenario and ground truth use 'ticket_001'."""
    entry = next(c for c in base if c.id == "multi_turn_base_173")
    assert entry.ground_truth[3] == (ToolCall("close_ticket", {"ticket_id": "ticket_001"}),)
    with Environment(["TicketAPI"], entry.initial_config) as env:
        closed, = env.run(entry.ground_truth[3])
        assert closed.ok and "closed successfully" in closed.output
        wrong, = env.run([call("close_ticket", ticket_id=1.5)])
        assert wrong.refused is None and wrong.argument_problem  # the default rule: the method decides
    with Environment(["TicketAPI"], entry.initial_config, strict_arguments=True) as env:
        closed, = env.run(entry.ground_truth[3])
        assert closed.ok and "closed successfully" in closed.output and closed.argument_problem is None
        wrong, = env.run([call("close_ticket", ticket_id=1.5)])
        assert wrong.refused == Refusal.BAD_ARGUMENTS.value


# --------------------------------------------------------------------------- outputs and state

def test_outputs_are_the_text_bfcl_evals_executor_gives_the_model() -> None:
    config = {"GorillaFileSystem": {"root": {"alice": {"type": "directory", "contents": {
        "café.txt": {"type": "file", "content": "crème"}}}}}}
    with Environment(["GorillaFileSystem", "TravelAPI"], config) as env:
        cat, echo, missing, raised = env.run([
            call("cat", file_name="café.txt"),  # a dict: json.dumps, ASCII escapes as bfcl-eval's default
            call("echo", content="x", file_name="café.txt"),  # None
            call("cat", file_name="nope.txt"),  # the simulated API's own error is data
            call("get_flight_cost", travel_from="AAA", travel_to="BBB", travel_date="2026-01-01",
                 travel_class="economy"),  # the method raises
        ])
    assert cat == CallOutcome(cat.call, True, '{"file_content": "cr\\u00e8me"}')
    assert (echo.ok, echo.output) == (True, "None")
    assert missing.ok and "No such file" in missing.output
    assert (raised.ok, raised.refused) == (False, None)
    assert raised.output == "Error during execution: No available route for the given airports."


@needs_mpmath
def test_a_result_json_cannot_write_is_shown_with_str_as_bfcl_eval_does() -> None:
    with Environment(["MathAPI"], {}) as env:
        root, = env.run([call("square_root", number=2, precision=5)])
    assert root.output == "{'result': Decimal('1.4142')}"


def test_long_outputs_are_cut_with_a_marker() -> None:
    config = {"GorillaFileSystem": {"root": {"alice": {"type": "directory", "contents": {
        "big.txt": {"type": "file", "content": "y" * 5000}}}}}}
    with Environment(["GorillaFileSystem"], config, max_output_chars=100) as env:
        cat, = env.run([call("cat", file_name="big.txt")])
    assert cat.ok and cat.output.startswith('{"file_content": "yyy')
    assert cat.output.endswith("[output cut at 100 of 5020 characters]") and len(cat.output) < 160


def test_state_is_plain_data_of_the_public_attributes() -> None:
    with Environment(["GorillaFileSystem", "MessageAPI"], FILES) as env:
        env.run([call("cd", folder="docs"), call("touch", file_name="new.txt")])
        state = env.state()
    assert set(state) == {"GorillaFileSystem", "MessageAPI"}
    root = state["GorillaFileSystem"]["root"]
    assert root["contents"]["docs"] == {"type": "directory", "name": "docs", "contents": {
        "new.txt": {"type": "file", "name": "new.txt", "content": ""}}}
    assert state["GorillaFileSystem"]["long_context"] is False
    assert state["MessageAPI"]["generated_ids"] == set() and state["MessageAPI"]["message_count"] == 3
    assert not any(key.startswith("_") for attributes in state.values() for key in attributes)


# --------------------------------------------------------------------------- refusals

@pytest.fixture(scope="module")
def files() -> Any:
    with Environment(["GorillaFileSystem", "TwitterAPI"], FILES) as env:
        yield env


@pytest.fixture(scope="module")
def strict_files() -> Any:
    with Environment(["GorillaFileSystem", "TwitterAPI"], FILES, strict_arguments=True) as env:
        yield env


@pytest.mark.parametrize("name", ["_load_scenario", "__class__", "__init__", "__dict__", "__getattribute__",
                                  "_navigate_to_directory", "__import__", "_"])
def test_private_and_dunder_names_are_refused(files: Environment, name: str) -> None:
    before = files.state()
    refused, after = files.run([ToolCall(name, {"scenario": {}}), call("pwd")])
    assert (refused.ok, refused.refused) == (False, Refusal.PRIVATE_NAME.value)
    assert refused.output.startswith("Error during execution: ") and "private" in refused.output
    assert after.ok and files.state() == before


@pytest.mark.parametrize("name", ["eval", "exec", "open", "system", "Directory", "mean", "ls2", "", "cd.__call__",
                                  "GorillaFileSystem.cd"])
def test_names_that_are_not_documented_public_methods_are_refused(files: Environment, name: str) -> None:
    refused, = files.run([ToolCall(name, {})])
    assert refused.refused == Refusal.UNKNOWN_FUNCTION.value and refused.output.startswith("Error during execution: ")


def test_an_unknown_name_gets_a_suggestion(files: Environment) -> None:
    refused, = files.run([call("mkdri", dir_name="x")])
    assert "Did you mean 'mkdir'?" in refused.output


DOC_PROBLEMS = [
    (call("cd", folder=1), "argument 'folder' must be a string, not an integer"),
    (call("cd", folder=None), "argument 'folder' must not be null"),
    (call("ls", a="yes"), "argument 'a' must be a boolean, not a string"),
    (call("tail", file_name="notes.txt", lines=True), "argument 'lines' must be an integer, not a boolean"),
    (call("tail", file_name="notes.txt", lines=2.0), "argument 'lines' must be an integer, not a number"),
    (call("post_tweet", content="hi", tags="#a"), "argument 'tags' must be an array, not a string"),
    (call("post_tweet", content="hi", tags=["#a", 2]), "argument 'tags[1]' must be a string, not an integer"),
    (call("cd", folder="docs", extra=1), "cd has no parameter 'extra'"),
    (call("cd", folder="docs", __class__="x"), "cd has no parameter '__class__'"),
    (call("cd"), "cd is missing the required argument 'folder'"),
    (call("cd", folder={"__class__": {"__init__": {"__globals__": {}}}}), "must be a string, not an object"),
]


@pytest.mark.parametrize(("tool_call", "fragment"), [
    *DOC_PROBLEMS,
    (ToolCall("cd", "folder=docs"), "the arguments of cd must be an object"),  # type: ignore[arg-type]
    (ToolCall("cd", {1: "docs"}), "keys must be strings"),  # type: ignore[dict-item]
])
def test_under_the_strict_rule_arguments_that_do_not_validate_against_the_doc_are_refused(
        strict_files: Environment, tool_call: ToolCall, fragment: str) -> None:
    before = strict_files.state()
    refused, = strict_files.run([tool_call])
    assert refused.refused == Refusal.BAD_ARGUMENTS.value and fragment in refused.output, refused.output
    assert strict_files.state() == before


@pytest.mark.parametrize(("tool_call", "fragment"), DOC_PROBLEMS)
def test_by_default_the_method_decides_and_the_strict_rule_is_noted(files: Environment, tool_call: ToolCall,
                                                                  fragment: str) -> None:
    ran, = files.run([tool_call])
    assert ran.refused is None and ran.argument_problem is not None and fragment in ran.argument_problem


def test_an_unknown_keyword_gives_bfcl_evals_type_error_text_by_default(files: Environment) -> None:
    ran, = files.run([call("cd", folder="a", evil=1)])
    assert (ran.ok, ran.refused) == (False, None)
    assert ran.output == "Error during execution: GorillaFileSystem.cd() got an unexpected keyword argument 'evil'"
    missing, = files.run([call("cd")])
    assert missing.output == ("Error during execution: GorillaFileSystem.cd() missing 1 required positional "
                              "argument: 'folder'")


@pytest.mark.parametrize("strict", [False, True])
def test_positional_arguments_bind_by_the_methods_signature(strict: bool) -> None:
    with Environment(["GorillaFileSystem", "TravelAPI"], FILES, strict_arguments=strict) as env:
        moved, tail = env.run([ToolCall("cd", {}, ("alice",)), ToolCall("tail", {"lines": 1}, ("notes.txt",))])
        assert moved.ok and moved.call == ToolCall("cd", {"folder": "alice"})
        assert tail.ok and "line two" in tail.output and tail.call.arguments == {"file_name": "notes.txt", "lines": 1}
        # The doc lists insurance_cost before booking_id; the method takes booking_id third, as Python binds it.
        insured, = env.run([ToolCall("purchase_insurance", {}, ("token", "comprehensive", "booking_1", 50.0, "c"))])
        assert insured.call.arguments["booking_id"] == "booking_1" and insured.call.arguments["insurance_cost"] == 50.0


@pytest.mark.parametrize(("tool_call", "fragment"), [
    (ToolCall("cd", {}, ("a", "b")), "cd('a', 'b') cannot be bound: cd takes at most 1 positional argument (folder), "
                                     "2 given"),
    (ToolCall("cd", {"folder": "a"}, ("b",)), "cd('b', folder='a') cannot be bound: argument 'folder' is given twice"),
    (ToolCall("pwd", {}, (1,)), "pwd(1) cannot be bound: pwd takes at most 0 positional arguments, 1 given"),
    (ToolCall("cd", {}, ({1, 2},)), "type set"),
])
def test_a_positional_call_that_cannot_be_bound_is_refused_naming_the_call(files: Environment, tool_call: ToolCall,
                                                                           fragment: str) -> None:
    refused, = files.run([tool_call])
    assert refused.refused == Refusal.BAD_ARGUMENTS.value and fragment in refused.output, refused.output
    assert refused.output.startswith("Error during execution: ")


def test_an_optional_parameter_may_be_null_and_an_integer_is_a_number(files: Environment) -> None:
    found, tail = files.run([ToolCall("find", {"path": ".", "name": None}),
                             call("tail", file_name="notes.txt", lines=1)])
    assert found.ok and "notes.txt" in found.output
    assert tail.ok and "line two" in tail.output


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(("value", "fragment"), [
    ({1, 2}, "type set"),
    (b"bytes", "type bytes"),
    (object(), "type object"),
    (1j, "type complex"),
    (float("nan"), "not finite"),
    (float("inf"), "not finite"),
    (2 ** 5000, "integer larger than"),
    ("x" * 2_000_000, "characters of text"),
    (list(range(20_000)), "more than 10000 values"),
    (_nested(MAX_ARGUMENT_DEPTH + 1), "nested more than"),
    (_nested(200_000), "nested more than"),
])
def test_arguments_that_are_not_bounded_json_data_are_refused_without_a_crash(files: Environment, value: Any,
                                                                              fragment: str) -> None:
    started = time.monotonic()
    refused, after = files.run([call("cd", folder=value), call("pwd")])
    assert refused.refused == Refusal.BAD_ARGUMENTS.value and fragment in refused.output, refused.output
    assert after.ok and time.monotonic() - started < 2.0


def test_ten_thousand_calls_in_one_step_are_capped(files: Environment) -> None:
    started = time.monotonic()
    outcomes = files.run([call("pwd")] * 10_000)
    assert len(outcomes) == 10_000
    assert all(o.ok for o in outcomes[:64])
    assert {o.refused for o in outcomes[64:]} == {Refusal.TOO_MANY_CALLS.value}
    assert time.monotonic() - started < 5.0
    assert files.run([call("pwd")])[0].ok  # the next step runs again


# --------------------------------------------------------------------------- time and memory bounds

@needs_mpmath
def test_a_huge_exponent_is_stopped_at_the_time_bound_and_the_episode_goes_on() -> None:
    with Environment(["GorillaFileSystem", "MathAPI", "MessageAPI"], FILES, time_limit_s=0.5) as env:
        made = env.run([call("mkdir", dir_name="kept"), call("message_login", user_id="USR001"),
                        call("send_message", receiver_id="USR002", message="before")])
        assert all(o.ok for o in made)
        started = time.monotonic()
        power, = env.run([call("power", base=10, exponent=10 ** 9)])
        elapsed = time.monotonic() - started
        assert (power.ok, power.refused) == (False, Refusal.TIME_LIMIT.value)
        assert "did not finish within 0.5 s" in power.output and power.output.startswith("Error during execution: ")
        assert elapsed < 5.0
        after = env.run([call("ls"), call("send_message", receiver_id="USR003", message="after")])
        assert after[0].ok and "kept" in after[0].output  # the calls before were replayed
        usage = env.usage()
        assert usage.starts == 2 and usage.calls_replayed == 3
    # the replay reproduced the random message ids: the same as an uninterrupted run
    with Environment(["GorillaFileSystem", "MathAPI", "MessageAPI"], FILES) as straight:
        straight.run([call("mkdir", dir_name="kept"), call("message_login", user_id="USR001"),
                      call("send_message", receiver_id="USR002", message="before")])
        assert straight.run([call("send_message", receiver_id="USR003", message="after")])[0] == after[1]


@needs_mpmath
def test_a_call_over_the_memory_bound_is_refused_and_the_episode_goes_on() -> None:
    with Environment(["MathAPI", "GorillaFileSystem"], FILES, memory_limit_mb=256) as env:
        env.run([call("mkdir", dir_name="kept")])
        hog, = env.run([call("square_root", number=2, precision=10 ** 9)])
        assert (hog.ok, hog.refused) == (False, Refusal.MEMORY_LIMIT.value)
        assert "more than 256 MB" in hog.output
        ls, mean = env.run([call("ls"), call("mean", numbers=[1, 2])])
        assert "kept" in ls.output and mean.output == '{"result": 1.5}'
        assert env.usage().peak_memory_mb < 256


def test_the_worker_is_measured_and_bounded() -> None:
    with Environment(["GorillaFileSystem"], FILES) as env:
        usage = env.usage()
    assert usage.starts == 1 and usage.start_seconds > 0 and 5 < usage.peak_memory_mb < 256
    assert usage.bounds["memory"] and usage.bounds["files"]


def test_the_workers_peak_is_its_own_not_the_parents() -> None:
    """A worker started from a large process reports its own peak (ru_maxrss keeps the parent's across exec:
    the full suite, at 540 MB, made every worker look 540 MB big)."""
    ballast = bytearray(300 * 1024 * 1024)
    ballast[::4096] = b"\x01" * len(range(0, len(ballast), 4096))  # touched, so resident
    with Environment(["GorillaFileSystem"], FILES) as env:
        usage = env.usage()
    del ballast
    assert 5 < usage.peak_memory_mb < 256


# --------------------------------------------------------------------------- the real file system

def test_calls_cannot_touch_real_files(tmp_path: Path) -> None:
    canary = tmp_path / "canary.txt"
    canary.write_text("untouched", encoding="utf-8")
    before = sorted(p.name for p in tmp_path.iterdir())
    real = str(canary)
    with Environment(["GorillaFileSystem"], FILES) as env:
        outcomes = env.run([
            call("cat", file_name=real), call("cat", file_name="../../../../" + real),
            call("cd", folder=str(tmp_path)), call("cd", folder="/"), call("cd", folder=".."),
            call("touch", file_name=str(tmp_path / "created.txt")), call("mkdir", dir_name=str(tmp_path / "d")),
            call("echo", content="pwned", file_name=real), call("rm", file_name=real),
            call("mv", source=real, destination=str(tmp_path / "moved.txt")),
            call("cp", source=real, destination=str(tmp_path / "copy.txt")),
            call("grep", file_name=real, pattern="untouched"), call("diff", file_name1=real, file_name2=real),
            ToolCall("open", {"file": real, "mode": "w"}), ToolCall("__import__", {"name": "os"}),
        ])
        assert not any("untouched" in o.output for o in outcomes)
    assert canary.read_text(encoding="utf-8") == "untouched"
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_the_worker_does_not_inherit_the_parents_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-canary-secret")
    with Environment(["GorillaFileSystem"], FILES) as env:
        process = env._process
        assert process is not None
        environ = Path(f"/proc/{process.pid}/environ")
        if not environ.exists():
            pytest.skip("no /proc on this system")
        assert b"sk-canary-secret" not in environ.read_bytes()


def test_the_workers_audit_hook_allows_imports_and_nothing_else(tmp_path: Path) -> None:
    package = tmp_path / "lib"
    package.mkdir()
    guard = worker_module.Guard([str(package)])
    guard("open", (str(package / "module.py"), "r", os.O_RDONLY))  # a lazy import reads its module
    guard("os.listdir", (str(package),))
    guard("import", ("module", None, [], [], []))
    for event, args in [("open", (str(tmp_path / "canary.txt"), "r", os.O_RDONLY)),
                        ("open", (str(package / "module.py"), "w", os.O_WRONLY)),
                        ("open", (str(package / "data.json"), "r", os.O_RDONLY)),
                        ("open", (3, "r", os.O_RDONLY)),
                        ("os.listdir", (str(tmp_path),)), ("subprocess.Popen", ("sh", [], None, None)),
                        ("os.system", (b"true",)), ("socket.connect", (None, ("1.2.3.4", 80))),
                        ("os.remove", (str(package / "module.py"), -1)), ("ctypes.dlopen", ("libc.so.6",))]:
        with pytest.raises(PermissionError):
            guard(event, args)


# --------------------------------------------------------------------------- bounds of a step, an episode, the state

def _doubling_tree(rounds: int) -> list[ToolCall]:
    """A GorillaFileSystem answer whose state doubles every round while the worker stays small: ``cp`` shares the
    folder objects, so ``rounds`` rounds make 2 ** rounds copies of the first folder in the reported state."""
    calls = [call("mkdir", dir_name="l0"), call("cd", folder="l0"), call("touch", file_name="f.txt"),
             call("cd", folder="..")]
    for k in range(rounds):
        calls += [call("mkdir", dir_name=f"l{k + 1}"), call("cp", source=f"l{k}", destination=f"l{k + 1}"),
                  call("mv", source=f"l{k}", destination=f"m{k}"), call("cp", source=f"m{k}", destination=f"l{k + 1}")]
    return calls


EMPTY_HOME = {"GorillaFileSystem": {"root": {"alice": {"type": "directory", "contents": {}}}}}


def test_a_state_past_its_bounds_is_an_environment_failure_at_once() -> None:
    """Issue 31: 64 calls then 60 (about 5 KB) make 2 ** 30 folders in the reported state; it used to stop the run
    with 'could not report its state (out of memory)'."""
    calls = _doubling_tree(30)
    assert len(calls) == 124 and len(json.dumps([[c.name, c.arguments] for c in calls])) < 6000
    with Environment(["GorillaFileSystem"], EMPTY_HOME) as env:
        outcomes = env.run(calls[:64]) + env.run(calls[64:])
        assert all(o.ok for o in outcomes), [o.output for o in outcomes if not o.ok]
        started = time.monotonic()
        with pytest.raises(EnvironmentFailure, match="max_state_values=100000") as failure:
            env.state()
        assert failure.value.reason == "state_too_large" and time.monotonic() - started < 5.0
        assert env.usage().peak_memory_mb < 256
        assert env.run([call("pwd")])[0].ok  # the worker itself is unharmed


def test_a_state_within_its_bounds_is_reported_whole_and_the_bounds_can_be_raised() -> None:
    with Environment(["GorillaFileSystem"], EMPTY_HOME) as env:
        env.run(_doubling_tree(5))
        state = env.state()
    folder = state["GorillaFileSystem"]["root"]["contents"]["l5"]
    for level in range(4, -1, -1):  # every level holds the level below twice, as l{k} and m{k}
        assert folder["contents"][f"l{level}"] == {**folder["contents"][f"m{level}"], "name": f"l{level}"}
        folder = folder["contents"][f"l{level}"]
    assert folder["contents"] == {"f.txt": {"type": "file", "name": "f.txt", "content": ""}}
    with Environment(["GorillaFileSystem"], EMPTY_HOME, max_state_values=200) as env:
        env.run(_doubling_tree(5))
        with pytest.raises(EnvironmentFailure, match="more than 200 values"):
            env.state()
    with Environment(["GorillaFileSystem"], EMPTY_HOME, max_state_depth=10) as env:
        env.run(_doubling_tree(5))
        with pytest.raises(EnvironmentFailure, match="nested more than 10 levels"):
            env.state()
    with Environment(["GorillaFileSystem"], FILES, max_state_chars=10) as env:
        with pytest.raises(EnvironmentFailure, match="more than 10 characters"):
            env.state()


def test_running_out_of_memory_while_reporting_the_state_is_an_environment_failure() -> None:
    with Environment(["GorillaFileSystem"], EMPTY_HOME, memory_limit_mb=64, max_state_values=10 ** 9,
                     max_state_chars=10 ** 12) as env:
        calls = _doubling_tree(30)
        env.run(calls[:64])
        env.run(calls[64:])
        with pytest.raises(EnvironmentFailure, match="memory_limit_mb=64") as failure:
            env.state()
    assert failure.value.reason == "out_of_memory"


def test_the_arguments_of_a_step_are_bounded_in_bytes() -> None:
    """64 native echo calls of 900 KB each would carry 57.6 MB in one step: all but the first are refused."""
    content = "x" * 900_000
    with Environment(["GorillaFileSystem"], FILES) as env:
        outcomes = env.run([call("echo", content=content, file_name=f"f{i}.txt") for i in range(64)])
        assert outcomes[0].ok
        assert {o.refused for o in outcomes[1:]} == {Refusal.STEP_ARGUMENT_BYTES.value}
        assert "more than 1048576 bytes" in outcomes[1].output and outcomes[1].output.startswith("Error during")
        small, = env.run([call("echo", content="y", file_name="next.txt")])  # the next step has its own budget
        assert small.ok and env.usage().peak_memory_mb < 100
    with Environment(["GorillaFileSystem"], FILES, max_step_argument_bytes=200) as env:
        first, second = env.run([call("touch", file_name="a" * 60), call("touch", file_name="b" * 120)])
        assert first.ok and second.refused == Refusal.STEP_ARGUMENT_BYTES.value


@needs_mpmath
def test_a_step_is_bounded_in_environment_time() -> None:
    """Eight huge powers in one answer: the first stopped at time_limit_s, the second when the step's time runs
    out, the rest not run (it took 8 x (5 s + a restart) before the step bound)."""
    with Environment(["MathAPI", "GorillaFileSystem"], FILES, time_limit_s=0.4, step_time_limit_s=0.6) as env:
        env.run([call("mkdir", dir_name="kept")])
        started = time.monotonic()
        outcomes = env.run([call("power", base=10, exponent=10 ** 8)] * 8)
        elapsed = time.monotonic() - started
        assert [o.refused for o in outcomes] == ["time_limit"] + ["step_time_limit"] * 7
        assert "stopped when the step's environment time (0.6 s) ran out" in outcomes[1].output
        assert "is spent; this call was not run" in outcomes[2].output
        assert elapsed < 3.0
        ls, = env.run([call("ls")])  # the next step runs, on the state before the powers
        assert ls.ok and "kept" in ls.output


@needs_mpmath
def test_an_episode_is_bounded_in_environment_time() -> None:
    with Environment(["MathAPI"], {}, time_limit_s=0.3, step_time_limit_s=0.5, episode_time_limit_s=1.0) as env:
        started = time.monotonic()
        with pytest.raises(EnvironmentFailure, match="episode_time_limit_s") as failure:
            for _ in range(10):
                env.run([call("power", base=10, exponent=10 ** 8)])
        assert failure.value.reason == "episode_time_limit" and time.monotonic() - started < 4.0
        with pytest.raises(EnvironmentFailure, match="episode_time_limit_s"):
            env.run([call("mean", numbers=[1, 2])])


@needs_mpmath
def test_a_replay_that_gives_another_result_is_an_environment_failure() -> None:
    """MessageAPI seeded with null draws other message ids in the restarted worker: the episode cannot go on."""
    with Environment(["MessageAPI", "MathAPI"], {"MessageAPI": {"random_seed": None}}, time_limit_s=0.3) as env:
        env.run([call("message_login", user_id="USR001"), call("send_message", receiver_id="USR002", message="hi")])
        with pytest.raises(EnvironmentFailure, match="gave another result") as failure:
            env.run([call("power", base=10, exponent=10 ** 8)])
        assert env.usage().starts == 2  # reporting usage after the failure starts no third worker
    assert failure.value.reason == "replay_differs"


def test_a_worker_that_cannot_be_started_again_is_an_environment_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    with Environment(["GorillaFileSystem"], FILES) as env:
        env.run([call("mkdir", dir_name="kept")])
        process = env._process
        assert process is not None

        def refuse(first: bytes, *args: object, **kwargs: object) -> None:
            raise RunError("no more processes")

        monkeypatch.setattr(env_module, "_new_process", refuse)
        os.kill(process.pid, signal.SIGKILL)
        with pytest.raises(EnvironmentFailure, match="could not be started again: no more processes") as failure:
            env.run([call("ls")])
    assert failure.value.reason == "worker_failed"


def test_results_may_keep_non_ascii_characters() -> None:
    config = {"GorillaFileSystem": {"root": {"alice": {"type": "directory", "contents": {
        "café.txt": {"type": "file", "content": "crème"}}}}}}
    with Environment(["GorillaFileSystem"], config, ascii_results=False) as env:
        cat, ls = env.run([call("cat", file_name="café.txt"), call("ls")])
    assert cat.output == '{"file_content": "crème"}' and ls.output == '{"current_directory_content": ["café.txt"]}'


# --------------------------------------------------------------------------- the fork server

needs_fork_server = pytest.mark.skipif(not env_module._FORK_SERVER, reason="workers are spawned on this system")


def _parent_of(pid: int) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    except OSError:
        return None
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))


def _gone(pid: int, wait_s: float = 5.0) -> bool:
    """Ended within ``wait_s``: no such process, or a zombie no one has reaped yet."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            if "State:\tZ" in Path(f"/proc/{pid}/status").read_text(encoding="ascii"):
                return True
        except OSError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)


def _reaped(pid: int) -> bool:
    """No such process within a few seconds (not even a zombie)."""
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.01)
    return False


def _children(pid: int) -> dict[int, str]:
    """``pid``'s children and their states (R, S, Z, ...), from /proc."""
    states = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text(encoding="ascii")
            except OSError:
                continue
            fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
            if fields.get("PPid", "").strip() == str(pid):
                states[int(entry.name)] = fields["State"].split()[0]
    return states


def _server() -> Any:
    """The fork server this process's environments use now (one per worker environment and ``sys.path``): an
    earlier test that ran environments under another ``sys.path`` leaves its own, still usable, beside it."""
    key = (sys.executable, tuple(sorted(env_module._worker_environment().items())), env_module._sys_path())
    server = env_module._SERVERS.get(key)
    assert server is not None and server.usable()
    return server


@needs_fork_server
def test_workers_are_forked_from_one_server_and_start_in_milliseconds() -> None:
    Environment(["GorillaFileSystem"], FILES).close()  # the server is running from here on
    starts = []
    pids = set()
    for _ in range(10):
        with Environment(["GorillaFileSystem", "TwitterAPI"], FILES) as env:
            assert env._process is not None
            pids.add(_parent_of(env._process.pid))
            starts.append(env.usage().start_seconds)
    assert sorted(starts)[5] < 0.03  # a fresh interpreter took 40-125 ms
    if Path("/proc").exists():
        assert pids == {_server().process.pid}


@needs_fork_server
def test_every_fork_starts_from_pristine_modules() -> None:
    """A method that changes its shared default list (TwitterAPI.post_tweet's mentions=[]) changes it in that
    worker only: the server never runs a method."""
    config = {"TwitterAPI": {"username": "alice", "password": "pw", "authenticated": True}}
    with Environment(["TwitterAPI"], config) as env:
        env.run([call("post_tweet", content="first"), call("mention", tweet_id=0, mentioned_usernames=["bob"])])
        assert env.state()["TwitterAPI"]["tweets"][0]["mentions"] == ["bob"]
    with Environment(["TwitterAPI"], config) as env:
        env.run([call("post_tweet", content="second")])
        assert env.state()["TwitterAPI"]["tweets"][0]["mentions"] == []


@needs_fork_server
@pytest.mark.skipif(not Path("/proc").exists(), reason="reads /proc")
def test_ended_workers_are_reaped_and_forgotten_ones_too() -> None:
    Environment(["GorillaFileSystem"], FILES).close()
    server = _server().process.pid
    before = _children(server)  # other tests' environments still open
    for _ in range(5):
        Environment(["GorillaFileSystem"], FILES).close()
    forgotten = [Environment(["GorillaFileSystem"], FILES) for _ in range(3)]
    pids = [env._process.pid for env in forgotten if env._process is not None]
    del forgotten
    gc.collect()
    with Environment(["GorillaFileSystem"], FILES) as env:  # its fork ends the forgotten ones first
        assert env._process is not None
        assert all(_reaped(pid) for pid in pids)
        children = _children(server)  # no zombie left: only workers of open environments
        assert env._process.pid in children and set(children) <= set(before) | {env._process.pid}
        pid = env._process.pid
    # Closed, it waits in its server's pool for the next environment (it puts its state back first).
    assert set(_children(server)) <= set(before) | {pid}
    assert pid in [worker.pid for workers in _server().idle.values() for worker in workers]


@needs_fork_server
def test_a_closed_environment_s_worker_serves_the_next_one_from_its_pristine_state() -> None:
    """The worker goes back to the pool and the next environment gets it, with the modules' state put back (the
    default list TwitterAPI.post_tweet changed; the rest is tested on ``Pristine`` itself)."""
    config = {"TwitterAPI": {"username": "alice", "password": "pw", "authenticated": True}}
    with Environment(["TwitterAPI", "MathAPI"], config) as env:
        assert env._process is not None
        first = env._process.pid
        env.run([call("post_tweet", content="first"), call("mention", tweet_id=0, mentioned_usernames=["bob"]),
                 call("square_root", number=2, precision=5)])
        assert env.state()["TwitterAPI"]["tweets"][0]["mentions"] == ["bob"]
    with Environment(["TwitterAPI", "MathAPI"], config) as env:
        assert env._process is not None and env._process.pid == first
        assert env.usage().starts == 1
        env.run([call("post_tweet", content="second")])
        assert env.state()["TwitterAPI"]["tweets"][0]["mentions"] == []


@needs_fork_server
def test_a_worker_stopped_by_a_bound_is_not_reused() -> None:
    with Environment(["GorillaFileSystem"], FILES, time_limit_s=0.2) as env:
        assert env._process is not None
        env._process.end()  # as when a bound stops it: the environment is no longer in step with it
        env._in_sync = False
        gone = env._process.pid
    assert gone not in [worker.pid for workers in _server().idle.values() for worker in workers]


@needs_fork_server
def test_a_dead_server_is_replaced_and_the_episode_goes_on() -> None:
    with Environment(["GorillaFileSystem"], FILES) as env:
        env.run([call("mkdir", dir_name="kept")])
        old = _server().process
        old.kill()
        old.wait()
        if sys.platform.startswith("linux"):  # its workers end with it
            assert env._process is not None and _gone(env._process.pid)
            crashed, = env.run([call("pwd")])
            assert crashed.refused == Refusal.CRASHED.value
        ls, = env.run([call("ls")])
        assert ls.ok and "kept" in ls.output
        assert _server().process.pid != old.pid


@needs_fork_server
def test_the_server_ends_when_its_parent_does(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(
        "import os, sys\n"
        "from promptgrid.matrix.episodes import _environment as _env\n"
        "from promptgrid.matrix.conversations import Environment\n"
        "env = Environment(['GorillaFileSystem'], {})\n"
        "print(next(iter(_env._SERVERS.values())).process.pid, env._process.pid, flush=True)\n"
        "os._exit(0)  # no atexit, no close: the server sees its socket end\n", encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=True,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    server, worker = (int(pid) for pid in done.stdout.split())
    assert _gone(server, wait_s=10) and _gone(worker, wait_s=10)


@needs_fork_server
def test_environments_may_be_started_from_many_threads_at_once() -> None:
    def episode(index: int) -> str:
        outputs = []
        for _ in range(5):
            with Environment(["GorillaFileSystem"], FILES) as env:
                outputs.append(env.run([call("mkdir", dir_name=f"d{index}"), call("ls")])[1].output)
        assert len(set(outputs)) == 1
        return outputs[0]

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(episode, range(16)))
    assert all(f'"d{index}"' in output for index, output in enumerate(results))


def test_where_there_is_no_fork_server_each_worker_is_a_fresh_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(env_module, "_FORK_SERVER", False)
    with Environment(["GorillaFileSystem"], FILES) as env:
        assert isinstance(env._process, env_module._Spawned)
        outcomes = env.run([call("cd", folder="docs"), call("touch", file_name="new.txt")])
        assert all(o.ok for o in outcomes)
        assert env.state()["GorillaFileSystem"]["root"]["contents"]["docs"]["contents"]["new.txt"]["content"] == ""
        process = env._process
    assert process.popen.poll() is not None


# --------------------------------------------------------------------------- life cycle and set-up errors

def test_close_ends_the_worker_and_the_environment_refuses_further_use() -> None:
    env = Environment(["GorillaFileSystem"], FILES)
    process = env._process
    assert process is not None and not _gone(process.pid, wait_s=0)
    env.close()
    env.close()
    assert env._process is None
    # Ended, or (a forked worker) back in its server's pool for the next environment.
    pooled = [worker for workers in getattr(getattr(process, "server", None), "idle", {}).values()
              for worker in workers]
    assert process in pooled or _reaped(process.pid)
    with pytest.raises(RunError, match="closed"):
        env.run([call("pwd")])


def test_unknown_classes_and_unusable_bounds_are_errors() -> None:
    with pytest.raises(DatasetError, match="Did you mean 'GorillaFileSystem'"):
        Environment(["GorillaFileSytem"], {})
    with pytest.raises(DatasetError, match="reaches the network"):
        Environment(["WebSearchAPI"], {})
    with pytest.raises(DatasetError, match="no environment class"):
        Environment([], {})
    for bound in ({"time_limit_s": 0}, {"memory_limit_mb": 1}, {"max_calls_per_step": 0},
                  {"max_output_chars": 2.5}, {"time_limit_s": float("nan")}, {"max_step_argument_bytes": 0},
                  {"step_time_limit_s": 0}, {"episode_time_limit_s": -1.0}, {"max_state_values": 0},
                  {"max_state_depth": 5000}, {"max_state_chars": -1}):
        with pytest.raises(RunError, match=next(iter(bound))):
            Environment(["GorillaFileSystem"], {}, **bound)


def test_a_scenario_the_classes_cannot_load_is_a_dataset_error() -> None:
    with pytest.raises(DatasetError, match="initial_config of GorillaFileSystem cannot be loaded"):
        Environment(["GorillaFileSystem"], {"GorillaFileSystem": {"root": "not a folder"}})


def test_a_module_that_cannot_be_imported_is_a_missing_dependency(monkeypatch: pytest.MonkeyPatch) -> None:
    from promptgrid.matrix.episodes import _environment as _env
    monkeypatch.setitem(_env.ENVIRONMENT_CLASSES, "MathAPI", ("no_such_module", "math_api.json"))
    with pytest.raises(MissingDependencyError, match="pip install --no-deps bfcl-eval"):
        Environment(["MathAPI"], {})


def test_functions_for_gives_the_docs_bfcl_eval_sends() -> None:
    docs = functions_for(["TwitterAPI", "GorillaFileSystem"])
    assert len(docs) == 14 + 18 and docs[0]["name"] == "authenticate_twitter" and docs[14]["name"] == "cat"
    assert all(doc["description"].endswith(" Note that the provided function is in Python 3 syntax.") for doc in docs)
    raw = functions_for(["GorillaFileSystem"], ["sort", "cat"], python_hint=False)
    assert [d["name"] for d in raw][:2] == ["cd", "cp"] and "sort" not in {d["name"] for d in raw}
    assert not raw[0]["description"].endswith("syntax.")
    raw[0]["name"] = "changed"  # fresh copies every time
    assert functions_for(["GorillaFileSystem"])[0]["name"] == "cat"
    with pytest.raises(DatasetError, match="'srot' is not a function"):
        functions_for(["GorillaFileSystem"], ["srot"])


def test_a_parked_environment_lets_its_worker_go_and_replays_its_calls_on_the_next_one() -> None:
    """``park`` (a batch round's wait): the worker goes back to its pool; the next call starts a worker and
    replays the calls that ran, so the state and every output are as if it had stayed."""
    with Environment(["GorillaFileSystem"], FILES) as env:
        env.run([call("mkdir", dir_name="kept"), call("cd", folder="kept")])
        before = env.state()
        env.park()
        env.park()  # nothing to let go the second time
        assert env._process is None
        assert env.state() == before
        touched, = env.run([call("touch", file_name="after.txt")])
        assert touched.ok
        listed, = env.run([call("ls")])
        assert "after.txt" in listed.output
        usage = env.usage()
        assert usage.starts == 2 and usage.calls_replayed == 2
