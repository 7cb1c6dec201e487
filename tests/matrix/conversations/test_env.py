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
import importlib
import json
import os
import time
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
from promptgrid.matrix.conversations import _worker as worker_module

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


@pytest.mark.parametrize(("tool_call", "fragment"), [
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
    (ToolCall("cd", "folder=docs"), "the arguments of cd must be an object"),  # type: ignore[arg-type]
    (ToolCall("cd", {1: "docs"}), "keys must be strings"),  # type: ignore[dict-item]
])
def test_arguments_that_do_not_validate_against_the_doc_are_refused(files: Environment, tool_call: ToolCall,
                                                                    fragment: str) -> None:
    before = files.state()
    refused, = files.run([tool_call])
    assert refused.refused == Refusal.BAD_ARGUMENTS.value and fragment in refused.output, refused.output
    assert files.state() == before


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
    ({"__class__": {"__init__": {"__globals__": {}}}}, "must be a string, not an object"),
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


# --------------------------------------------------------------------------- life cycle and set-up errors

def test_close_ends_the_worker_and_the_environment_refuses_further_use() -> None:
    env = Environment(["GorillaFileSystem"], FILES)
    process = env._process
    assert process is not None and process.poll() is None
    env.close()
    env.close()
    assert process.poll() is not None
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
                  {"max_output_chars": 2.5}, {"time_limit_s": float("nan")}):
        with pytest.raises(RunError, match=next(iter(bound))):
            Environment(["GorillaFileSystem"], {}, **bound)


def test_a_scenario_the_classes_cannot_load_is_a_dataset_error() -> None:
    with pytest.raises(DatasetError, match="initial_config of GorillaFileSystem cannot be loaded"):
        Environment(["GorillaFileSystem"], {"GorillaFileSystem": {"root": "not a folder"}})


def test_a_module_that_cannot_be_imported_is_a_missing_dependency(monkeypatch: pytest.MonkeyPatch) -> None:
    from promptgrid.matrix.conversations import _env

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
