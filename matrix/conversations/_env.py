"""BFCL's stateful API classes as a tool environment: calls dispatched by name, validated, bounded in a worker.

BFCL V4's multi-turn categories run the model's calls against simulated APIs
(a file system, a trading bot, a travel agency, ...). bfcl-eval builds a code
string per call and ``eval``s it, guarded by a list of eight forbidden names.
promptgrid never evaluates anything. ``Environment`` holds the instances of
the entry's classes (imported from the installed bfcl-eval package, never
copied) in a separate process (``_worker.py``) and runs a ``ToolCall`` only if

1. its name is public (no leading underscore, so no dunder either) and is
   the name of a documented method of one of the involved classes (the
   function docs in bfcl-eval's ``data/multi_turn_func_doc``; the worker also
   checks it is a bound method of the instance), and
2. its arguments validate against that function's doc: every required
   parameter given, no parameter the doc does not list, each value of the
   documented type (``string``; ``integer``, a bool is not one; ``float`` /
   ``number``, an integer is accepted; ``boolean``; ``array`` with its
   ``items``; ``dict`` with its listed ``properties``; ``None`` only for a
   parameter that is not required), all of it JSON data (no sets, bytes or
   objects), at most ``MAX_ARGUMENT_DEPTH`` levels deep, ``MAX_ARGUMENT_VALUES``
   values, ``MAX_ARGUMENT_CHARS`` characters of strings and integers of at
   most ``MAX_INTEGER_BITS`` bits. This is checked in this process, without
   recursion, before anything is sent.

Each call is bounded: in wall time (``time_limit_s``: the worker is killed
at the bound; it also ends itself shortly after through ``SIGALRM``), in
memory (``memory_limit_mb``: the worker's address space, ``RLIMIT_AS``), in
output (``max_output_chars``, cut with a marker) and in number
(``max_calls_per_step`` per ``run``; the rest are refused without running).
A worker killed or ended at a bound is started again and the calls that ran
before are replayed in order; their results must come out the same (the
classes seed their random generators from the scenario), so the episode goes
on from the same state. The worker cannot write files, start processes or
read the parent's environment variables; the simulated APIs themselves never
touch the real file system.

A call that is refused, or that raises inside the method, is not an
exception: it is a ``CallOutcome`` whose ``output`` is the error text the
model gets (bfcl-eval's form, ``"Error during execution: ..."``), and the
episode goes on. ``refused`` names why a call did not run (``Refusal``).
Only a failure of the machinery (bfcl-eval or one of its packages missing,
a worker that cannot start or whose replay disagrees) raises.

Outputs are what bfcl-eval's executor gives the model: a ``str`` result as
it is; a ``dict`` as ``json.dumps``, or ``str`` when that fails; anything else
``str``. ``state()`` is, per class, every public attribute of the instance
(what bfcl-eval's state checker compares) as plain, comparable data.
"""

from __future__ import annotations

import builtins
import copy
import enum
import io
import math
import os
import pickle
import selectors
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from promptgrid.errors import DatasetError, MissingDependencyError, RunError, closest
from promptgrid.templates import BFCL_INSTALL_HINT, BfclSource, find_bfcl

from ..datasets._bfcl import _PYTHON_HINT, _read_jsonl
from . import _worker as protocol

__all__ = [
    "ENVIRONMENT_CLASSES",
    "MAX_ARGUMENT_CHARS",
    "MAX_ARGUMENT_DEPTH",
    "MAX_ARGUMENT_VALUES",
    "MAX_INTEGER_BITS",
    "CallOutcome",
    "Environment",
    "EnvironmentFailure",
    "EnvironmentUsage",
    "Refusal",
    "ToolCall",
    "functions_for",
]

_BACKEND = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
ENVIRONMENT_CLASSES: dict[str, tuple[str, str]] = {
    "GorillaFileSystem": ("gorilla_file_system", "gorilla_file_system.json"),
    "MathAPI": ("math_api", "math_api.json"),
    "MessageAPI": ("message_api", "message_api.json"),
    "TwitterAPI": ("posting_api", "posting_api.json"),
    "TicketAPI": ("ticket_api", "ticket_api.json"),
    "TradingBot": ("trading_bot", "trading_bot.json"),
    "TravelAPI": ("travel_booking", "travel_booking.json"),
    "VehicleControlAPI": ("vehicle_control", "vehicle_control.json"),
}
"""The classes of BFCL V4's multi-turn categories: class -> (module in bfcl-eval's ``func_source_code``, doc file).
bfcl-eval's other backends are left out on purpose: ``WebSearchAPI`` reaches the network, the memory backends need
packages (and files) of their own."""
_STATELESS = frozenset({"MathAPI"})
"""bfcl-eval's ``STATELESS_CLASSES``: created without ``_load_scenario``."""
_ALSO_ACCEPTED: dict[tuple[str, str], str] = {("TicketAPI", "ticket_id"): "string"}
"""(class, parameter) -> a type accepted besides the documented one, where bfcl-eval's own data contradicts its docs.
TicketAPI documents ``ticket_id`` as an integer, but scenarios hold string ids (``"ticket_001"`` in
``multi_turn_*_173``, whose ground truth closes that ticket) and the methods find tickets by equality."""
_NOT_OFFERED = {"WebSearchAPI": "it reaches the network",
                "MemoryAPI_kv": "the memory categories are not supported",
                "MemoryAPI_vector": "the memory categories are not supported",
                "MemoryAPI_rec_sum": "the memory categories are not supported"}

MAX_ARGUMENT_DEPTH = 32
"""Deepest nesting of one call's arguments (BFCL's functions take at most a dict of scalars)."""
MAX_ARGUMENT_VALUES = 10_000
"""Most values (scalars and containers) in one call's arguments."""
MAX_ARGUMENT_CHARS = 1_000_000
"""Most characters of strings (keys included) in one call's arguments."""
MAX_INTEGER_BITS = 4096
"""Largest integer argument, in bits (about 1,233 decimal digits)."""

class EnvironmentFailure(RunError):
    """The environment of one episode cannot go on: its state cannot be reported within the bounds, a replay
    after a restart gave another result, the episode's environment time ran out, or its worker could not be
    started again. It ends that episode only (stored as a failure naming conversation, variant, model, turn
    and step); the run goes on. ``reason`` is a short machine-readable cause (``state_too_large``,
    ``replay_differs``, ``episode_time_limit``, ``out_of_memory``, ``worker_failed``)."""

    def __init__(self, message: str, reason: str = "worker_failed") -> None:
        super().__init__(message)
        self.reason = reason


_START_TIMEOUT_S = 60.0
_STATE_TIMEOUT_S = 60.0
_WORKER = Path(protocol.__file__).resolve()
_TIMEOUT = object()
_ENDED = object()


class Refusal(str, enum.Enum):
    """Why a call did not run; ``CallOutcome.refused`` holds the ``.value``."""

    UNKNOWN_FUNCTION = "unknown_function"
    """Not a documented public method of an involved class."""
    PRIVATE_NAME = "private_name"
    """A name with a leading underscore (private helpers, dunders such as ``__class__``)."""
    BAD_ARGUMENTS = "bad_arguments"
    """Arguments that do not validate against the function doc, or are not bounded JSON data."""
    TIME_LIMIT = "time_limit"
    """The call ran past ``time_limit_s``; the worker was killed and the calls before replayed."""
    MEMORY_LIMIT = "memory_limit"
    """The call needed more than ``memory_limit_mb``; the worker was restarted and the calls before replayed."""
    TOO_MANY_CALLS = "too_many_calls"
    """Beyond ``max_calls_per_step`` in one ``run``."""
    CRASHED = "crashed"
    """The worker ended during the call for another reason; it was restarted and the calls before replayed."""


@dataclass(frozen=True)
class ToolCall:
    """One function call as a model made it (or a ground truth lists it): a name and keyword arguments."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CallOutcome:
    """What one call gave: ``output`` is the text the model gets back.

    ``ok`` is true when the method ran and returned (its result may still
    describe an error of the simulated API, such as ``{"error": "No such
    file"}``: that is data). ``ok`` is false when the method raised, or when
    the call was ``refused`` (a ``Refusal`` value) and never ran. ``seconds``
    is the wall time of the call (not compared).
    """

    call: ToolCall
    ok: bool
    output: str
    refused: str | None = None
    seconds: float = field(default=0.0, compare=False)


@dataclass(frozen=True)
class EnvironmentUsage:
    """What an environment has cost so far: worker starts (the first and every restart), the time they took,
    calls run and replayed, the peak resident memory of the worker (the largest over its starts, in MiB) and
    which of the worker's bounds the operating system accepted."""

    starts: int
    start_seconds: float
    calls_run: int
    calls_replayed: int
    peak_memory_mb: float
    bounds: Mapping[str, bool]


# --------------------------------------------------------------------------- function docs

def _bfcl(bfcl_data: str | os.PathLike[str] | None) -> BfclSource:
    source = find_bfcl(bfcl_data, error=DatasetError)
    if source is None:
        raise DatasetError(f"BFCL's multi-turn function docs are read from bfcl-eval, and no bfcl-eval was found. "
                           f"{BFCL_INSTALL_HINT}.")
    return source


def _check_classes(classes: Iterable[str]) -> list[str]:
    names = [classes] if isinstance(classes, str) else list(classes)
    out: list[str] = []
    for name in names:
        if not isinstance(name, str) or name not in ENVIRONMENT_CLASSES:
            why = _NOT_OFFERED.get(name) if isinstance(name, str) else None
            reason = f" ({why})." if why else f".{closest(str(name), ENVIRONMENT_CLASSES)}"
            raise DatasetError(f"unknown environment class {name!r}{reason} The classes: "
                               f"{', '.join(ENVIRONMENT_CLASSES)}.")
        if name not in out:
            out.append(name)
    if not out:
        raise DatasetError(f"no environment class given; name one or more of {', '.join(ENVIRONMENT_CLASSES)}.")
    return out


@lru_cache(maxsize=32)
def _class_docs(source: BfclSource, name: str) -> tuple[dict[str, Any], ...]:
    """The function docs of one class, as bfcl-eval's file has them (callers copy them before changing them)."""
    docs = _read_jsonl(source, f"data/multi_turn_func_doc/{ENVIRONMENT_CLASSES[name][1]}")
    for doc in docs:
        if not isinstance(doc.get("name"), str) or not isinstance(doc.get("parameters"), dict):
            raise DatasetError(f"{source.where('data/multi_turn_func_doc/' + ENVIRONMENT_CLASSES[name][1])}: a "
                               "function doc without a name or parameters; point --bfcl-data at an unmodified "
                               "bfcl-eval.")
    return tuple(docs)


def functions_for(classes: Sequence[str], missing: Iterable[str] = (), *, python_hint: bool = True,
                  bfcl_data: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """The BFCL function docs of ``classes``, as bfcl-eval's generation pipeline gives them to the model.

    In class order, each class's docs in its file's order (bfcl-eval's
    ``populate_test_cases_with_predefined_functions``), without the first doc
    of each name in ``missing`` (the held-out functions of ``miss_func``
    entries), and with bfcl-eval's language hint (" Note that the provided
    function is in Python 3 syntax.") appended to each description unless
    ``python_hint=False``. The held-out docs never get that hint in bfcl-eval:
    they are removed before the hint is added and added back unchanged at
    their turn. Returns fresh copies. Raises ``DatasetError`` for an unknown
    class or a ``missing`` name that no doc has.
    """
    return _functions(_bfcl(bfcl_data), classes, missing, python_hint=python_hint)


def _functions(source: BfclSource, classes: Sequence[str], missing: Iterable[str], *,
               python_hint: bool) -> list[dict[str, Any]]:
    names = _check_classes(classes)
    docs = [copy.deepcopy(doc) for name in names for doc in _class_docs(source, name)]
    for name in missing:
        index = next((i for i, doc in enumerate(docs) if doc["name"] == name), None)
        if index is None:
            raise DatasetError(f"held-out function {name!r} is not a function of {', '.join(names)}."
                               f"{closest(str(name), [doc['name'] for doc in docs])}")
        docs.pop(index)
    if python_hint:
        for doc in docs:
            doc["description"] = str(doc.get("description", "")) + _PYTHON_HINT
    return docs


# --------------------------------------------------------------------------- argument validation

def _shape_problem(arguments: dict[str, Any]) -> str | None:
    """Why ``arguments`` are not bounded JSON data, or ``None``. Iterative: hostile nesting costs no recursion."""
    stack: list[tuple[Any, int]] = [(arguments, 1)]
    values = 0
    chars = 0
    while stack:
        value, depth = stack.pop()
        values += 1
        kind = type(value)
        if value is None or kind is bool:
            continue
        if kind is int:
            if value.bit_length() > MAX_INTEGER_BITS:
                return f"an integer larger than {MAX_INTEGER_BITS} bits"
            continue
        if kind is float:
            if not math.isfinite(value):
                return "a number that is not finite"
            continue
        if kind is str:
            chars += len(value)
            if chars > MAX_ARGUMENT_CHARS:
                return f"more than {MAX_ARGUMENT_CHARS} characters of text"
            continue
        if kind not in (dict, list, tuple):
            return f"a value of type {kind.__name__}, which is not JSON data"
        if depth >= MAX_ARGUMENT_DEPTH:
            return f"values nested more than {MAX_ARGUMENT_DEPTH} levels deep"
        if values + len(value) > MAX_ARGUMENT_VALUES:
            return f"more than {MAX_ARGUMENT_VALUES} values"
        if kind is dict:
            for key in value:
                if type(key) is not str:
                    return f"an object key of type {type(key).__name__} (keys must be strings)"
                chars += len(key)
            if chars > MAX_ARGUMENT_CHARS:
                return f"more than {MAX_ARGUMENT_CHARS} characters of text"
            stack.extend((child, depth + 1) for child in value.values())
        else:
            stack.extend((child, depth + 1) for child in value)
    return None


_TYPE_WORDS = {"string": "a string", "integer": "an integer", "float": "a number", "number": "a number",
               "boolean": "a boolean", "array": "an array", "list": "an array", "tuple": "an array",
               "dict": "an object", "object": "an object"}


def _kind_of(value: Any) -> str:
    kind = type(value)
    if value is None:
        return "null"
    if kind is bool:
        return "a boolean"
    if kind is int:
        return "an integer"
    if kind is float:
        return "a number"
    if kind is str:
        return "a string"
    return "an object" if kind is dict else "an array"


def _type_problem(value: Any, schema: Any, path: str, *, nullable: bool) -> str | None:
    """Why ``value`` (bounded JSON data) does not fit ``schema`` (a BFCL parameter doc), or ``None``."""
    if value is None:
        return None if nullable else f"argument {path!r} must not be null"
    if not isinstance(schema, Mapping):
        return None
    expected = schema.get("type")
    kind = type(value)
    if expected == "string":
        fits = kind is str
    elif expected == "integer":
        fits = kind is int
    elif expected in ("float", "number"):
        fits = kind in (int, float)
    elif expected == "boolean":
        fits = kind is bool
    elif expected in ("array", "list", "tuple"):
        fits = kind in (list, tuple)
        if fits and isinstance(schema.get("items"), Mapping):
            for index, item in enumerate(value):
                problem = _type_problem(item, schema["items"], f"{path}[{index}]", nullable=False)
                if problem:
                    return problem
    elif expected in ("dict", "object"):
        fits = kind is dict
        properties = schema.get("properties")
        if fits and isinstance(properties, Mapping):
            for key, item in value.items():  # keys the doc does not list are left to the method
                if key in properties:
                    problem = _type_problem(item, properties[key], f"{path}.{key}", nullable=True)
                    if problem:
                        return problem
    else:  # "any", or a type word this check does not know: the doc's business, not the model's
        return None
    if fits:
        return None
    return f"argument {path!r} must be {_TYPE_WORDS[expected]}, not {_kind_of(value)}"


def _argument_problem(name: str, arguments: dict[str, Any], parameters: Mapping[str, Any],
                      also: Mapping[str, str]) -> str | None:
    """Why ``arguments`` do not validate against the function's ``parameters`` doc, or ``None``; ``also`` maps a
    parameter to a type it accepts besides its documented one."""
    shape = _shape_problem(arguments)
    if shape:
        return f"the arguments of {name} hold {shape}"
    properties = parameters.get("properties") or {}
    required = [p for p in parameters.get("required") or () if isinstance(p, str)]
    unknown = [key for key in arguments if key not in properties]
    if unknown:
        return (f"{name} has no parameter {', '.join(repr(k) for k in unknown)}; its parameters are "
                f"{', '.join(repr(p) for p in properties) or 'none'}")
    absent = [p for p in required if p not in arguments]
    if absent:
        return f"{name} is missing the required argument {', '.join(repr(p) for p in absent)}"
    for key, value in arguments.items():
        problem = _type_problem(value, properties[key], key, nullable=key not in required)
        if problem and key in also and not _type_problem(value, {"type": also[key]}, key, nullable=False):
            problem = None
        if problem:
            return problem
    return None


# --------------------------------------------------------------------------- the worker's replies

class _PlainUnpickler(pickle.Unpickler):
    """Unpickles builtin data only: no class is looked up except ``set`` and ``frozenset``."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in ("set", "frozenset"):
            return getattr(builtins, name)
        raise pickle.UnpicklingError(f"the environment process sent a {module}.{name}, which is not plain data")


def _worker_environment() -> dict[str, str]:
    """The worker's environment variables: none of the parent's secrets; the time zone kept (``TradingBot``
    formats local times, as it does inside bfcl-eval's own process); a fixed hash seed for replays."""
    env = {"PYTHONHASHSEED": "0"}
    for name in ("TZ", "SYSTEMROOT"):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


# --------------------------------------------------------------------------- the environment

class Environment:
    """The instances of BFCL API ``classes``, loaded with ``initial_config``, in a bounded worker process.

    Use it as a context manager (or call ``close``): it owns a process. Not
    thread-safe; ``run`` blocks for at most ``time_limit_s`` per call (plus a
    restart and replay when a call hits a bound). ``long_context`` loads the
    scenarios as bfcl-eval's ``long_context`` category does. The function docs
    for validation come from bfcl-eval's data (``bfcl_data``, else
    ``$PROMPTGRID_BFCL_DATA``, else the installed package); the classes always
    come from the installed ``bfcl_eval`` package.

    Raises ``DatasetError`` for an unknown class or an ``initial_config`` the
    classes cannot load, ``MissingDependencyError``
    when bfcl-eval or a package its classes import (``mpmath`` for
    ``MathAPI``) is missing, ``RunError`` for unusable bounds or a worker that
    cannot start.
    """

    def __init__(
        self,
        classes: Sequence[str],
        initial_config: Mapping[str, Any],
        *,
        long_context: bool = False,
        time_limit_s: float = 5.0,
        memory_limit_mb: int = 512,
        max_calls_per_step: int = 64,
        max_output_chars: int = 65_536,
        bfcl_data: str | os.PathLike[str] | None = None,
    ) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._selector: selectors.BaseSelector | None = None
        self._closed = False
        self.classes = tuple(_check_classes(classes))
        if not isinstance(initial_config, Mapping):
            raise DatasetError(f"initial_config must be an object (class -> state), not {type(initial_config)}.")
        _check_bound("time_limit_s", time_limit_s, 0.01, integer=False)
        _check_bound("memory_limit_mb", memory_limit_mb, 64, integer=True)
        _check_bound("max_calls_per_step", max_calls_per_step, 1, integer=True)
        _check_bound("max_output_chars", max_output_chars, 1, integer=True)
        self.long_context = bool(long_context)
        self.time_limit_s = float(time_limit_s)
        self.memory_limit_mb = int(memory_limit_mb)
        self.max_calls_per_step = int(max_calls_per_step)
        self.max_output_chars = int(max_output_chars)
        self._initial_config = copy.deepcopy(dict(initial_config))
        source = _bfcl(bfcl_data)
        self._doc_names = {name: [doc["name"] for doc in _class_docs(source, name)] for name in self.classes}
        self._parameters: dict[str, Mapping[str, Any]] = {}
        for name in self.classes:  # a later class wins a name two classes share, as in bfcl-eval's executor
            self._parameters.update({doc["name"]: doc["parameters"] for doc in _class_docs(source, name)})
        self._methods: dict[str, str] = {}
        self._bounds: dict[str, bool] = {}
        self._ran: list[tuple[str, dict[str, Any], bool, str]] = []
        self._starts = 0
        self._start_seconds = 0.0
        self._replayed = 0
        self._peak_kib = 0
        self._start()

    # ----------------------------------------------------------------- public

    def __enter__(self) -> Environment:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._ran)} calls run"
        return f"Environment({', '.join(self.classes)}; {state})"

    @property
    def functions(self) -> tuple[str, ...]:
        """The names of the functions this environment runs (documented public methods of its classes)."""
        return tuple(self._methods)

    def run(self, calls: Sequence[ToolCall]) -> list[CallOutcome]:
        """Run one step's calls in order; one ``CallOutcome`` per call, in the same order (see the module
        docstring for what is refused and why). The calls past ``max_calls_per_step`` are refused unrun."""
        self._ensure_open()
        outcomes = []
        for index, call in enumerate(calls):
            if index >= self.max_calls_per_step:
                outcomes.append(_refused(call, Refusal.TOO_MANY_CALLS,
                                         f"more than {self.max_calls_per_step} calls in one step; this one was not "
                                         "run"))
                continue
            outcomes.append(self._run_one(call))
        return outcomes

    def state(self) -> dict[str, dict[str, Any]]:
        """Per class, its instance's public attributes (those bfcl-eval's state checker compares) as plain data:
        dicts, lists, tuples, sets and scalars; a simulated directory as ``{"type": "directory", "name", "contents"}``
        and a file as ``{"type": "file", "name", "content"}`` (they compare by name and contents, as in bfcl-eval).
        An attribute compares equal here exactly when it does in bfcl-eval's state checker."""
        self._ensure_open()
        reply = self._request(("state",), time.monotonic() + max(_STATE_TIMEOUT_S, self.time_limit_s))
        if isinstance(reply, tuple) and reply[0] == "state":
            return reply[1]
        self._kill()
        self._restart()
        raise RunError(f"the environment of {', '.join(self.classes)} could not report its state ({_why(reply)}).")

    def usage(self) -> EnvironmentUsage:
        """Starts, calls and the worker's peak memory so far."""
        self._ensure_open()
        self._note_peak()
        return EnvironmentUsage(starts=self._starts, start_seconds=self._start_seconds, calls_run=len(self._ran),
                                calls_replayed=self._replayed,
                                peak_memory_mb=round(self._peak_kib / 1024, 1), bounds=dict(self._bounds))

    def close(self) -> None:
        """End the worker process. Safe to call twice; the environment cannot be used afterwards."""
        if self._closed:
            return
        self._closed = True
        process = self._process
        if process is not None and process.poll() is None:
            try:
                self._send(("exit",))
                process.wait(timeout=1.0)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._kill()

    def __del__(self) -> None:  # a forgotten close must not leave a process behind
        try:
            self._kill()
        except Exception:  # interpreter shutdown: modules may be gone
            pass

    # ----------------------------------------------------------------- one call

    def _run_one(self, call: Any) -> CallOutcome:
        name = getattr(call, "name", None)
        arguments = getattr(call, "arguments", None)
        if not isinstance(name, str) or not name:
            return _refused(call, Refusal.UNKNOWN_FUNCTION, "a call needs a function name")
        if name.startswith("_"):
            return _refused(call, Refusal.PRIVATE_NAME,
                            f"{name[:80]!r} is private; only the functions in the tool list can be called")
        if name not in self._methods:
            hint = closest(name[:80], self._methods)
            return _refused(call, Refusal.UNKNOWN_FUNCTION,
                            f"there is no function {name[:80]!r}; only the functions in the tool list can be "
                            f"called.{hint}")
        if not isinstance(arguments, Mapping):
            return _refused(call, Refusal.BAD_ARGUMENTS, f"the arguments of {name} must be an object of "
                                                         "parameter names and values")
        given = dict(arguments)
        owner = self._methods[name]
        also = {parameter: kind for (cls, parameter), kind in _ALSO_ACCEPTED.items() if cls == owner}
        problem = _argument_problem(name, given, self._parameters[name], also)
        if problem:
            return _refused(call, Refusal.BAD_ARGUMENTS, problem)
        given = copy.deepcopy(given)  # bounded (checked above); the log must not change with the caller's dict
        started = time.monotonic()
        reply = self._request(("call", name, given), started + self.time_limit_s)
        seconds = time.monotonic() - started
        if isinstance(reply, tuple) and reply[0] == protocol.OK and len(reply) == 3:
            _kind, ok, output = reply
            self._ran.append((name, given, bool(ok), str(output)))
            return CallOutcome(call, bool(ok), str(output), None, seconds)
        if isinstance(reply, tuple) and reply[0] == protocol.REFUSED:
            return _refused(call, Refusal.UNKNOWN_FUNCTION, str(reply[2]), seconds)
        if reply is _TIMEOUT:
            refusal, message = Refusal.TIME_LIMIT, (f"{name} did not finish within {self.time_limit_s:g} s and was "
                                                    "stopped")
        elif isinstance(reply, tuple) and reply[0] == protocol.MEMORY:
            refusal, message = Refusal.MEMORY_LIMIT, (f"{name} needed more than {self.memory_limit_mb} MB of memory "
                                                      "and was stopped")
        else:
            refusal, message = Refusal.CRASHED, f"{name} stopped the environment ({_why(reply)})"
        self._note_peak_of_busy_worker()
        self._kill()
        self._restart()
        return _refused(call, refusal, message + "; the state is as it was before the call", seconds)

    # ----------------------------------------------------------------- the process

    def _start(self) -> None:
        if find_spec("bfcl_eval") is None:
            raise MissingDependencyError("BFCL's multi-turn environments", "pip install --no-deps bfcl-eval")
        if not sys.executable:
            raise RunError("the environment needs a Python interpreter to start its worker, and sys.executable "
                           "is empty in this process.")
        started = time.monotonic()
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-s", "-B", str(_WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, env=_worker_environment(), cwd="/", close_fds=True,
                start_new_session=True)
        except OSError as exc:
            raise RunError(f"the environment's worker process could not start: {exc}.") from None
        assert self._process.stdout is not None
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._process.stdout.fileno(), selectors.EVENT_READ)
        self._starts += 1
        init = {
            "sys_path": [os.path.abspath(entry) for entry in sys.path if isinstance(entry, str)],
            "classes": list(self.classes),
            "modules": {name: f"{_BACKEND}.{ENVIRONMENT_CLASSES[name][0]}" for name in self.classes},
            "stateless": sorted(_STATELESS),
            "initial_config": self._initial_config,
            "long_context": self.long_context,
            "doc_names": self._doc_names,
            "memory_limit_bytes": self.memory_limit_mb * 1024 * 1024,
            "time_limit_s": self.time_limit_s,
            "max_output_chars": self.max_output_chars,
        }
        reply = self._request(init, started + _START_TIMEOUT_S)
        self._start_seconds += time.monotonic() - started
        if isinstance(reply, tuple) and reply[0] == protocol.READY:
            self._methods = dict(reply[1])
            self._bounds = dict(reply[2])
            return
        self._kill()
        if isinstance(reply, tuple) and reply[0] == protocol.ERROR and len(reply) == 5:
            _kind, error, message, module, phase = reply
            if phase == "load":
                raise DatasetError(f"the initial_config of {', '.join(self.classes)} cannot be loaded by bfcl-eval's "
                                   f"classes: {error}: {str(message)[:500]}.")
            if error in ("ModuleNotFoundError", "ImportError") and module:
                package = "bfcl-eval" if str(module).startswith("bfcl_eval") else str(module).split(".")[0]
                raise MissingDependencyError(f"BFCL's {', '.join(self.classes)} environment (module {module})",
                                             f"pip install {'--no-deps ' if package == 'bfcl-eval' else ''}"
                                             f"{package}")
            raise RunError(f"the environment of {', '.join(self.classes)} could not be set up: {error}: "
                           f"{str(message)[:500]}.")
        if isinstance(reply, tuple) and reply[0] == protocol.MEMORY:
            raise RunError(f"the initial state of {', '.join(self.classes)} does not fit in memory_limit_mb="
                           f"{self.memory_limit_mb}; give the environment more memory.")
        raise RunError(f"the environment's worker process did not start ({_why(reply)}).")

    def _restart(self) -> None:
        """A fresh worker brought to the state the calls that ran have made (they are replayed in order)."""
        self._start()
        if not self._ran:
            return
        deadline = time.monotonic() + _START_TIMEOUT_S + self.time_limit_s * len(self._ran)
        reply = self._request(("replay", [(name, arguments) for name, arguments, _ok, _out in self._ran]), deadline)
        if not (isinstance(reply, tuple) and reply[0] == "replayed" and len(reply[1]) == len(self._ran)):
            self._kill()
            raise RunError(f"the environment of {', '.join(self.classes)} could not be rebuilt by replaying its "
                           f"{len(self._ran)} calls ({_why(reply)}).")
        self._replayed += len(self._ran)
        for number, ((name, _arguments, ok, output), result) in enumerate(zip(self._ran, reply[1], strict=True)):
            if tuple(result) != (protocol.OK, ok, output):
                self._kill()
                raise RunError(f"replaying call {number + 1} ({name}) of the environment of "
                               f"{', '.join(self.classes)} gave another result than the first time; the "
                               "environment is not deterministic and the episode cannot go on.")

    def _send(self, message: Any) -> None:
        assert self._process is not None and self._process.stdin is not None
        protocol.write_message(self._process.stdin.fileno(), message)

    def _request(self, message: Any, deadline: float) -> Any:
        """Send ``message`` and wait for the reply until ``deadline``: the reply, ``_TIMEOUT`` or ``_ENDED``."""
        if self._process is None or self._process.poll() is not None:
            return _ENDED
        try:
            self._send(message)
        except OSError:  # BrokenPipeError: the worker is gone
            return _ENDED
        header = self._receive(protocol.HEADER.size, deadline)
        if not isinstance(header, bytes):
            return header
        size = protocol.HEADER.unpack(header)[0]
        if size > (self.memory_limit_mb + 64) * 1024 * 1024:
            return _ENDED  # more than the worker could hold: not a reply of ours
        payload = self._receive(size, deadline)
        if not isinstance(payload, bytes):
            return payload
        try:
            return _PlainUnpickler(io.BytesIO(payload)).load()
        except Exception:
            return _ENDED

    def _receive(self, size: int, deadline: float) -> Any:
        assert self._process is not None and self._process.stdout is not None and self._selector is not None
        fd = self._process.stdout.fileno()
        chunks: list[bytes] = []
        missing = size
        while missing > 0:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return _TIMEOUT
            if not self._selector.select(remaining):
                continue
            chunk = os.read(fd, min(missing, 1 << 20))
            if not chunk:
                return _ENDED
            chunks.append(chunk)
            missing -= len(chunk)
        return b"".join(chunks)

    def _note_peak(self) -> None:
        if self._process is None or self._process.poll() is not None:
            return
        reply = self._request(("usage",), time.monotonic() + 5.0)
        if isinstance(reply, tuple) and reply[0] == "usage" and isinstance(reply[1], int):
            kib = reply[1] // 1024 if sys.platform == "darwin" else reply[1]  # ru_maxrss: bytes on macOS
            self._peak_kib = max(self._peak_kib, kib)

    def _note_peak_of_busy_worker(self) -> None:
        """The peak memory of a worker that is about to be killed, read from ``/proc`` (it cannot be asked)."""
        if self._process is None:
            return
        try:
            status = Path(f"/proc/{self._process.pid}/status").read_text(encoding="ascii", errors="replace")
        except OSError:  # no /proc (macOS), or the worker is already gone
            return
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                fields = line.split()
                if len(fields) >= 2 and fields[1].isdigit():
                    self._peak_kib = max(self._peak_kib, int(fields[1]))

    def _kill(self) -> None:
        process, self._process = self._process, None
        if self._selector is not None:
            self._selector.close()
            self._selector = None
        if process is None:
            return
        if process.poll() is None:
            process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass

    def _ensure_open(self) -> None:
        if self._closed:
            raise RunError(f"the environment of {', '.join(self.classes)} is closed.")
        if self._process is None:
            self._restart()


def _check_bound(label: str, value: Any, minimum: float, *, integer: bool) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or \
            value < minimum or (integer and value != int(value)):
        kind = "a whole number" if integer else "a number"
        raise RunError(f"{label}={value!r} is not usable; give {kind} of at least {minimum:g}.")


def _refused(call: Any, refusal: Refusal, message: str, seconds: float = 0.0) -> CallOutcome:
    shown = call if isinstance(call, ToolCall) else ToolCall(str(getattr(call, "name", ""))[:200], {})
    return CallOutcome(shown, False, f"Error during execution: {message}", refusal.value, seconds)


def _why(reply: Any) -> str:
    if reply is _TIMEOUT:
        return "no answer in time"
    if reply is _ENDED:
        return "the worker process ended"
    if isinstance(reply, tuple) and reply and reply[0] == protocol.ERROR:
        return f"{reply[1]}: {str(reply[2])[:300]}"
    if isinstance(reply, tuple) and reply and reply[0] == protocol.MEMORY:
        return "out of memory"
    return "an unexpected answer"
