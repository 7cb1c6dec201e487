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
2. its positional arguments, if any (``sort('report.pdf')``), bind to the
   method's parameters by its signature (read from the installed class's
   source with ``ast``, ``method_signatures``), as Python binds them in
   bfcl-eval's ``eval``; a call with more positional arguments than
   parameters, or a parameter given by position and by name, is refused
   with a message naming the call;
3. its arguments are bounded JSON data (no sets, bytes or objects), at most
   ``MAX_ARGUMENT_DEPTH`` levels deep, ``MAX_ARGUMENT_VALUES`` values,
   ``MAX_ARGUMENT_CHARS`` characters of strings and integers of at most
   ``MAX_INTEGER_BITS`` bits. This is checked in this process, without
   recursion, before anything is sent.

Beyond that, the arguments reach the method as data and the method decides,
as in bfcl-eval (the default rule, ``"bfcl"``): ``set_budget_limit(
budget_limit='2857.14')`` runs (the method converts the string), an unknown
keyword or a missing argument is the ``TypeError`` the method raises, given
back as ``"Error during execution: ..."`` exactly as bfcl-eval's ``eval``
gives it. With ``strict_arguments=True`` (the ``"strict"`` rule) the
arguments must also validate against the function's doc, or the call is
refused (``bad_arguments``): every required parameter given, no parameter
the doc does not list, each value of the documented type (``string``;
``integer``, a bool is not one; ``float`` / ``number``, an integer is
accepted; ``boolean``; ``array`` with its ``items``; ``dict`` with its
listed ``properties``; ``None`` only for a parameter that is not required).
Under either rule ``CallOutcome.argument_problem`` says what the strict rule
finds wrong with a call, so a checker can tell where the two rules differ.

Each call is bounded: in wall time (``time_limit_s``: the worker is killed
at the bound; it also ends itself shortly after through ``SIGALRM``), in
memory (``memory_limit_mb``: the worker's address space, ``RLIMIT_AS``) and
in output (``max_output_chars``, cut with a marker). Each step (one ``run``)
is bounded in number of calls (``max_calls_per_step``), in bytes of
arguments (``max_step_argument_bytes``, the size of the calls as sent to the
worker: their text in UTF-8 and a few bytes per value) and in environment
time (``step_time_limit_s``: the calls, and the restarts and replays they
cause; a call still running when it runs out is stopped as at its own time
bound): the calls past a bound are refused without running. Each episode
(the life of one ``Environment``) is bounded in environment time
(``episode_time_limit_s``, the sum over its ``run`` calls); once it is spent
``run`` raises ``EnvironmentFailure`` (``episode_time_limit``). ``state()``
is bounded in values, nesting and characters (``max_state_values``,
``max_state_depth``, ``max_state_chars``: ``MAX_STATE_VALUES``, ...), counted
as it is built, so a state whose folders share objects (``cp`` shares them:
thirty rounds of copies report 2 ** 30 folders from a worker of 27 MB) ends
in ``EnvironmentFailure`` (``state_too_large``) in milliseconds.

A worker killed or ended at a bound is started again and the calls that ran
before are replayed in order; their results must come out the same (the
classes seed their random generators from the scenario), so the episode goes
on from the same state; if one does not, ``EnvironmentFailure``
(``replay_differs``). The worker cannot write files, start processes or
read the parent's environment variables; the simulated APIs themselves never
touch the real file system. Workers are forked from a fork server, one per
process (``_worker.py``). A closed environment's worker (one in step with its
environment: no bound hit, every request answered) goes back to its server's
pool: it puts its modules' state back in place (``_worker.Pristine``) and
serves the next environment with the same memory bound, so a start costs a
fraction of a millisecond; one that cannot show it restored everything ends,
and the next environment gets a fresh fork. Where there is no ``fork`` each
worker is a fresh interpreter (about 30 ms).

A call that is refused, or that raises inside the method, is not an
exception: it is a ``CallOutcome`` whose ``output`` is the error text the
model gets (bfcl-eval's form, ``"Error during execution: ..."``), and the
episode goes on. ``refused`` names why a call did not run (``Refusal``).
Only a failure of the machinery raises: at construction (bfcl-eval or one of
its packages missing, a worker that cannot start, data the classes cannot
load: ``MissingDependencyError``, ``RunError``, ``DatasetError``), and
afterwards ``EnvironmentFailure``, which ends that episode only.

Outputs are what bfcl-eval's executor gives the model: a ``str`` result as
it is; a ``dict`` as ``json.dumps`` (``ensure_ascii=False`` with
``ascii_results=False``), or ``str`` when that fails; anything else
``str``. ``state()`` is, per class, every public attribute of the instance
(what bfcl-eval's state checker compares) as plain, comparable data.
"""

from __future__ import annotations

import ast
import atexit
import builtins
import copy
import enum
import io
import math
import os
import pickle
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from promptgrid._astparse import parse
from promptgrid.errors import DatasetError, MissingDependencyError, PromptgridError, RunError, closest
from promptgrid.matrix.datasets._bfcl import _PYTHON_HINT, _read_jsonl
from promptgrid.matrix.episodes import _worker as protocol
from promptgrid.matrix.scoring.parse._pyast import POSITIONAL
from promptgrid.templates import BFCL_DATA_ENV, BFCL_INSTALL_HINT, BfclSource, find_bfcl

__all__ = [
    "ENVIRONMENT_CLASSES",
    "MAX_ARGUMENT_CHARS",
    "MAX_ARGUMENT_DEPTH",
    "MAX_ARGUMENT_VALUES",
    "MAX_INTEGER_BITS",
    "MAX_STATE_CHARS",
    "MAX_STATE_DEPTH",
    "MAX_STATE_VALUES",
    "CallOutcome",
    "Environment",
    "EnvironmentFailure",
    "EnvironmentUsage",
    "Refusal",
    "ToolCall",
    "bind_positional",
    "call_source",
    "decoded_call",
    "functions_for",
    "method_signatures",
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
MAX_STATE_VALUES = 100_000
"""Default ``max_state_values``: most values (scalars, containers, keys) ``state()`` reports. The largest ground-truth
state of BFCL's four multi-turn categories has 647."""
MAX_STATE_DEPTH = 100
"""Default ``max_state_depth``: deepest nesting of containers ``state()`` reports (a simulated folder takes two
levels: itself and its contents). The deepest ground-truth state has 9."""
MAX_STATE_CHARS = 10_000_000
"""Default ``max_state_chars``: most characters of text ``state()`` reports, a text counted each time it is
reported. The largest ground-truth state has 38,561."""
_MAX_STATE_DEPTH_ALLOWED = 2000
"""The largest ``max_state_depth`` accepted: deeper data cannot be pickled or compared within Python's recursion
limits."""

class EnvironmentFailure(RunError):
    """The environment of one episode cannot go on: its state cannot be reported within the bounds, a replay
    after a restart gave another result, the episode's environment time ran out, or its worker could not be
    started again. It ends that episode only (stored as a failure naming conversation, variant, model, turn
    and step); the run goes on. ``reason`` is a short machine-readable cause (``state_too_large``,
    ``replay_differs``, ``episode_time_limit``, ``out_of_memory``, ``worker_failed``)."""

    def __init__(self, message: str, reason: str = "worker_failed") -> None:
        super().__init__(message)
        self.reason = reason
        self.turn: int | None = None
        """The user turn being scored when scoring raised it (``check_conversation``), else ``None``."""


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
    STEP_TIME_LIMIT = "step_time_limit"
    """The step's environment time (``step_time_limit_s``) ran out: the call was stopped at it (the worker was
    restarted and the calls before replayed), or it came after and was not run."""
    STEP_ARGUMENT_BYTES = "step_argument_bytes"
    """The step's calls would carry more than ``max_step_argument_bytes`` of arguments with this one; not run."""


@dataclass(frozen=True)
class ToolCall:
    """One function call as a model made it (or a ground truth lists it): a name, keyword arguments and, where the
    answer wrote them (Python syntax, ``sort('report.pdf')``), positional arguments. ``Environment`` binds the
    positional ones to the method's parameters, by its signature, as Python does in bfcl-eval's ``eval``."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    positional: tuple[Any, ...] = ()


@dataclass(frozen=True)
class CallOutcome:
    """What one call gave: ``output`` is the text the model gets back.

    ``ok`` is true when the method ran and returned (its result may still
    describe an error of the simulated API, such as ``{"error": "No such
    file"}``: that is data). ``ok`` is false when the method raised, or when
    the call was ``refused`` (a ``Refusal`` value) and never ran. ``seconds``
    is the wall time of the call (not compared). ``call`` is the call as it
    ran: positional arguments bound to their parameter names.
    """

    call: ToolCall
    ok: bool
    output: str
    refused: str | None = None
    seconds: float = field(default=0.0, compare=False)
    argument_problem: str | None = None
    """What the strict argument rule finds wrong with the call's arguments (``None``: nothing). Under the strict
    rule such a call was refused for it; under the default rule it ran: either way the other rule would have
    treated the call differently."""


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

_BFCL_SOURCES: dict[tuple[Any, ...], BfclSource] = {}


def _bfcl(bfcl_data: str | os.PathLike[str] | None) -> BfclSource:
    # Found once per (argument, $PROMPTGRID_BFCL_DATA): every environment of a run asks (1,000 for a score-file).
    key = (None if bfcl_data is None else os.fspath(bfcl_data), os.environ.get(BFCL_DATA_ENV))
    found = _BFCL_SOURCES.get(key)
    if found is not None:
        return found
    source = find_bfcl(bfcl_data, error=DatasetError)
    if source is not None:
        _BFCL_SOURCES[key] = source
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


@lru_cache(maxsize=32)
def _class_docs_pickled(source: BfclSource, name: str) -> bytes:
    """``_class_docs`` as a pickle: loading it gives fresh copies several times faster than ``copy.deepcopy``."""
    return pickle.dumps(list(_class_docs(source, name)), protocol=pickle.HIGHEST_PROTOCOL)


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
    docs = [doc for name in names for doc in pickle.loads(_class_docs_pickled(source, name))]
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


# --------------------------------------------------------------------------- method signatures

_SIGNATURES_LOCK = threading.Lock()


def _class_signatures(name: str) -> Mapping[str, tuple[str, ...] | None]:
    """``_read_class_signatures`` for one thread at a time: CPython 3.11's ``ast.parse`` run in several threads at
    once can fail (``SystemError: AST constructor recursion depth mismatch``), as episodes' first environments
    do when they start together."""
    with _SIGNATURES_LOCK:
        return _read_class_signatures(name)


@lru_cache(maxsize=len(ENVIRONMENT_CLASSES))
def _read_class_signatures(name: str) -> Mapping[str, tuple[str, ...] | None]:
    """Per method of class ``name``, its parameters that a positional argument can fill, in order (``self`` left
    out); ``None`` for a method whose signature has other kinds (``*args``, keyword-only, positional-only), which
    no BFCL class has. Read with ``ast`` from the installed bfcl-eval module's source: nothing is imported here."""
    spec = find_spec("bfcl_eval")  # a top-level package: found without importing it
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    if not folders:
        raise MissingDependencyError("BFCL's multi-turn environments", "pip install --no-deps bfcl-eval")
    relative = Path(*_BACKEND.split(".")[1:], f"{ENVIRONMENT_CLASSES[name][0]}.py")
    path = Path(folders[0], relative)
    try:
        tree = parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, ValueError) as exc:
        raise RunError(f"{path}: the source of bfcl-eval's {name} cannot be read ({exc}); reinstall bfcl-eval "
                       "(pip install --no-deps bfcl-eval).") from None
    found = next((node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == name), None)
    if found is None:
        raise RunError(f"{path} has no class {name}; reinstall bfcl-eval (pip install --no-deps bfcl-eval).")
    signatures: dict[str, tuple[str, ...] | None] = {}
    for node in found.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            plain = not (args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs) and bool(args.args)
            signatures[node.name] = tuple(arg.arg for arg in args.args[1:]) if plain else None
    return signatures


def method_signatures(classes: Sequence[str]) -> dict[str, tuple[str, ...] | None]:
    """Per method name of ``classes``, the parameters a positional argument fills, in order (``_class_signatures``);
    a later class wins a name two classes share, as in bfcl-eval's executor."""
    signatures: dict[str, tuple[str, ...] | None] = {}
    for name in _check_classes(classes):
        signatures.update(_class_signatures(name))
    return signatures


def decoded_call(name: str, arguments: Mapping[str, Any]) -> ToolCall:
    """A call as the answer parser gives it (``{name: arguments}``) as a ``ToolCall``: the positional arguments of a
    Python answer (kept under the parser's ``POSITIONAL`` key when asked with ``positional=True``) set apart."""
    given = dict(arguments)
    positional = given.pop(POSITIONAL, ())
    return ToolCall(name, given, tuple(positional) if isinstance(positional, (tuple, list)) else (positional,))


def call_source(call: ToolCall, limit: int = 200) -> str:
    """``call`` written as Python, ``name('a', k=1)``, cut at ``limit`` characters: how refusals name a call."""
    parts = [repr(value) for value in call.positional]
    parts += [f"{key}={value!r}" for key, value in call.arguments.items()]
    text = f"{call.name}({', '.join(parts)})"
    return text if len(text) <= limit else text[:limit - 4] + "...)"


def bind_positional(call: ToolCall, parameters: Sequence[str] | None) -> ToolCall | str:
    """``call`` with its positional arguments named by ``parameters`` (the method's, in order), as Python binds
    them; or why they cannot be bound (more positional arguments than parameters, a parameter given both by
    position and by name, a method without such a signature). A call without positional arguments is returned
    as it is."""
    if not call.positional:
        return call
    shown = call_source(call)
    count = len(call.positional)
    if parameters is None:
        return f"{shown} cannot be bound: {call.name} takes its arguments by name only"
    if count > len(parameters):
        names = f" ({', '.join(parameters)})" if parameters else ""
        return (f"{shown} cannot be bound: {call.name} takes at most {len(parameters)} positional "
                f"argument{'' if len(parameters) == 1 else 's'}{names}, {count} given")
    named = dict(zip(parameters, call.positional, strict=False))
    twice = [key for key in named if key in call.arguments]
    if twice:
        return f"{shown} cannot be bound: argument {twice[0]!r} is given twice (by position and by name)"
    return ToolCall(call.name, {**named, **call.arguments})


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
    return _doc_problem(name, arguments, parameters, also)


def _doc_problem(name: str, arguments: dict[str, Any], parameters: Mapping[str, Any],
                 also: Mapping[str, str]) -> str | None:
    """``_argument_problem`` for arguments already known to be bounded JSON data: the strict rule's check."""
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


# --------------------------------------------------------------------------- worker processes

_FORK_SERVER = sys.platform != "win32" and hasattr(os, "fork") and hasattr(socket, "send_fds") and \
    hasattr(socket, "AF_UNIX")
"""Whether workers are forked from a fork server (Linux, macOS); if not, each is a fresh interpreter."""
_RESET = protocol.encode(("reset",))
_STATE_REQUEST = protocol.encode(("state",))
_PIPELINE_BYTES = 16_384
"""The most a step's calls may carry to go to the worker together: well inside a pipe's buffer (64 KiB on Linux,
16 KiB at least elsewhere), so the write never waits on a worker that is itself waiting to write results. A step
with more goes one call at a time."""
_MAX_IDLE_WORKERS = 16
"""Workers kept between environments per fork server (a study's concurrency is rarely higher; more are ended)."""
_SERVER_TIMEOUT_S = 30.0
"""How long an answer of the fork server may take (a fork takes milliseconds) before it is taken for dead."""


class _Process:
    """A worker seen from the parent: its process id and the parent's ends of its two pipes."""

    pid: int
    to_worker: int
    from_worker: int

    def end(self) -> None:
        """Kill the worker, wait for its end and close the pipes."""
        raise NotImplementedError

    def end_later(self) -> None:
        """``end`` where no lock may be taken (a finalizer): the pipes closed now, the worker reaped soon."""
        self.end()


class _Spawned(_Process):
    """A worker started as a fresh interpreter (``python -s -B _worker.py``), where there is no fork server."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        assert popen.stdin is not None and popen.stdout is not None
        self.popen = popen
        self.pid = popen.pid
        self.to_worker = popen.stdin.fileno()
        self.from_worker = popen.stdout.fileno()

    def end(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait()
        for stream in (self.popen.stdin, self.popen.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass


class _Forked(_Process):
    """A worker forked by the fork server: a child of the server, which kills and reaps it when asked."""

    def __init__(self, server: _ForkServer, pid: int, to_worker: int, from_worker: int) -> None:
        self.server = server
        self.pid = pid
        self.to_worker = to_worker
        self.from_worker = from_worker
        self._open = True
        self.reset_pending = False
        """A ``reset`` was sent when the worker went back to the pool: its answer comes before the next ``init``'s."""

    def _close_pipes(self) -> bool:
        if not self._open:
            return False
        self._open = False
        for fd in (self.to_worker, self.from_worker):
            try:
                os.close(fd)
            except OSError:
                pass
        return True

    def end(self) -> None:
        if self._close_pipes():
            self.server.end(self.pid)

    def end_later(self) -> None:
        if self._close_pipes():
            self.server.pending.append(self.pid)  # list.append is atomic: no lock taken here


def _receive_exact(connection: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            raise ConnectionResetError("the fork server closed its socket")
        data += chunk
    return data


class _ForkServer:
    """The parent's side of one fork server (``_worker.py --fork-server``): started once per process, sys.path and
    worker environment, it imports the API modules once and forks a worker per request (``_worker`` docstring).

    Requests are serialized by a lock, so threads may start and end workers at the same time. A server that does
    not answer in time, or whose socket fails, is killed (its workers end with it on Linux) and replaced by the
    next request."""

    def __init__(self, environment: Mapping[str, str], sys_path: Sequence[str]) -> None:
        self.owner = os.getpid()
        self.lock = threading.Lock()
        self.pending: list[int] = []
        self.broken = False
        self.idle: dict[int, list[_Forked]] = {}
        """Workers that ended an environment with ``reset``, by their memory bound, for the next environment."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-s", "-B", str(_WORKER), "--fork-server", str(theirs.fileno())],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env=dict(environment), cwd="/", close_fds=True, pass_fds=(theirs.fileno(),), start_new_session=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.socket = ours
        modules = [f"{_BACKEND}.{module}" for module, _doc in ENVIRONMENT_CLASSES.values()]
        try:
            ours.settimeout(_START_TIMEOUT_S)
            ours.sendall(protocol.encode({"sys_path": list(sys_path), "modules": modules}))
            size = protocol.HEADER.unpack(_receive_exact(ours, protocol.HEADER.size))[0]
            reply = _PlainUnpickler(io.BytesIO(_receive_exact(ours, min(size, 1 << 16)))).load()
            ours.settimeout(_SERVER_TIMEOUT_S)
        except (OSError, pickle.UnpicklingError, EOFError) as exc:
            self.close()
            raise OSError(f"the fork server did not start ({exc})") from None
        if not (isinstance(reply, tuple) and reply[:1] == (protocol.READY,)):
            self.close()
            raise OSError("the fork server did not start (an unexpected answer)")

    def usable(self) -> bool:
        return not self.broken and self.owner == os.getpid() and self.process.poll() is None

    def _ask(self, kind: bytes, number: int, fds: Sequence[int] = (), answered: bool = True) -> int:
        """One request and its answer (0 for a request without one); the lock is held. Any failure leaves the
        server broken."""
        try:
            request = protocol.REQUEST.pack(kind, number)
            if fds:
                socket.send_fds(self.socket, [request], list(fds))
            else:
                self.socket.sendall(request)
            if not answered:
                return 0
            return int(protocol.ANSWER.unpack(_receive_exact(self.socket, protocol.ANSWER.size))[0])
        except OSError:
            self.broken = True
            self.close()
            raise

    def _reap_pending(self) -> None:
        while self.pending:
            self._ask(protocol.END, self.pending.pop(), answered=False)

    def fork(self, first: bytes) -> tuple[_Forked, bytes]:
        """A new worker, and what it has not been sent yet of the ``first`` message: as much as the pipe holds
        goes before the fork, so the worker can start on it at once."""
        to_read, to_write = os.pipe()
        from_read, from_write = os.pipe()
        pid = 0
        try:
            os.set_blocking(to_write, False)
            try:
                sent = os.write(to_write, first)
            except BlockingIOError:
                sent = 0
            os.set_blocking(to_write, True)
            with self.lock:
                self._reap_pending()
                pid = self._ask(protocol.FORK, 0, (to_read, from_write))
        finally:
            os.close(to_read)
            os.close(from_write)
            if pid <= 0:
                os.close(to_write)
                os.close(from_read)
        if pid < 0:
            raise OSError(-pid, f"the fork server could not fork: {os.strerror(-pid)}")
        return _Forked(self, pid, to_write, from_read), first[sent:]

    def take(self, memory_limit_bytes: int) -> _Forked | None:
        """An idle worker with this memory bound (its ``reset`` answer still to read), or None."""
        with self.lock:
            workers = self.idle.get(memory_limit_bytes)
            # Not usable(): its poll() is a system call per environment; a server that died took its workers
            # with it, which the first write to one shows (then a fresh fork is asked for, and fails over).
            if not workers or self.broken or self.owner != os.getpid():
                return None
            try:
                self._reap_pending()  # forgotten environments' workers, as a fork would
            except OSError:
                return None
            return workers.pop()

    def give_back(self, worker: _Forked, memory_limit_bytes: int) -> None:
        """Keep a worker that was sent ``reset`` for the next environment (at most ``_MAX_IDLE_WORKERS``)."""
        with self.lock:
            workers = self.idle.setdefault(memory_limit_bytes, [])
            if not self.broken and self.owner == os.getpid() and \
                    sum(len(w) for w in self.idle.values()) < _MAX_IDLE_WORKERS:
                worker.reset_pending = True
                workers.append(worker)
                return
        worker.end()

    def end(self, pid: int) -> None:
        try:
            with self.lock:
                self._reap_pending()
                self._ask(protocol.END, pid, answered=False)
        except OSError:  # the server is gone, and its workers with it (Linux) or at the end of their input
            pass

    def close(self) -> None:
        """Close the socket (the server then ends its workers and exits) and wait for the server."""
        self.broken = True
        try:
            self.socket.close()
        except (OSError, AttributeError):
            pass
        process = getattr(self, "process", None)
        if process is None or self.owner != os.getpid():
            return
        try:
            process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


_BFCL_FOUND: list[bool] = []


def _bfcl_installed() -> bool:
    """Whether bfcl-eval is installed (looked up until it is found once)."""
    if not _BFCL_FOUND and find_spec("bfcl_eval") is not None:
        _BFCL_FOUND.append(True)
    return bool(_BFCL_FOUND)


_SERVERS: dict[tuple[Any, ...], _ForkServer] = {}
_SERVERS_LOCK = threading.Lock()


def _fork_server(environment: Mapping[str, str], sys_path: Sequence[str]) -> _ForkServer:
    """The fork server for this interpreter, worker environment and ``sys.path``, started if there is none yet
    (or the last one died)."""
    key = (sys.executable, tuple(sorted(environment.items())), tuple(sys_path))
    with _SERVERS_LOCK:
        server = _SERVERS.get(key)
        if server is None or not server.usable():
            if server is not None:
                server.close()
            server = _SERVERS[key] = _ForkServer(environment, sys_path)
        return server


def warm_up() -> None:
    """Start this process's fork server in the background, so that its imports (bfcl-eval's API classes) overlap the
    caller's own start-up (loading a dataset); the first ``Environment`` then finds it ready, or waits for it. Does
    nothing where workers are not forked or bfcl-eval is missing (the first ``Environment`` says why)."""
    if not (_FORK_SERVER and sys.executable and _bfcl_installed()):
        return
    threading.Thread(target=_start_server_quietly, name="promptgrid-fork-server", daemon=True).start()


def _start_server_quietly() -> None:
    try:
        _fork_server(_worker_environment(), list(_sys_path()))
    except Exception:  # noqa: BLE001 - the first environment starts it again and reports the error
        pass


@atexit.register
def _close_fork_servers() -> None:
    with _SERVERS_LOCK:
        servers = list(_SERVERS.values())
        _SERVERS.clear()
    for server in servers:
        server.close()


_SYS_PATH: list[tuple[tuple[Any, ...], tuple[str, ...]]] = []


def _sys_path() -> tuple[str, ...]:
    """``sys.path`` as absolute paths (the worker's), worked out again only when ``sys.path`` changes. A relative
    entry (``""``) stays resolved against the working directory of the first call: keying on the directory too
    would start one fork server per directory a process visits, for entries that hold no API class."""
    now = tuple(sys.path)
    if not _SYS_PATH or _SYS_PATH[0][0] != now:
        _SYS_PATH[:] = [(now, tuple(os.path.abspath(entry) for entry in now if isinstance(entry, str)))]
    return _SYS_PATH[0][1]


def _new_process(first: bytes, memory_limit_bytes: int, reuse: bool = True) -> tuple[_Process, bytes]:
    """A worker, and the part of the ``first`` message (``protocol.encode``-d) it has not been sent yet: one that
    ended an environment and put its state back (``reuse``; its ``reset_pending`` answer is read first), else one
    forked where a fork server can run, else spawned. Raises ``RunError`` when no worker can start."""
    if reuse and _FORK_SERVER and sys.executable:
        with _SERVERS_LOCK:
            server = _SERVERS.get((sys.executable, tuple(sorted(_worker_environment().items())), _sys_path()))
        idle = server.take(memory_limit_bytes) if server is not None else None
        if idle is not None:
            try:
                protocol.write_all(idle.to_worker, first)
                return idle, b""
            except OSError:  # it ended (its reset failed): a fresh one below
                idle.end()
    if not sys.executable:
        raise RunError("the environment needs a Python interpreter to start its worker, and sys.executable "
                       "is empty in this process.")
    environment = _worker_environment()
    if _FORK_SERVER:
        sys_path = list(_sys_path())
        error: Exception | None = None
        for _attempt in range(2):  # a server that died since the last worker is replaced once
            try:
                return _fork_server(environment, sys_path).fork(first)
            except OSError as exc:
                error = exc
        raise RunError(f"the environment's worker process could not be started: {error}.")
    try:
        popen = subprocess.Popen([sys.executable, "-s", "-B", str(_WORKER)], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=environment, cwd="/",
                                 close_fds=True, start_new_session=True)
    except OSError as exc:
        raise RunError(f"the environment's worker process could not start: {exc}.") from None
    return _Spawned(popen), first


# --------------------------------------------------------------------------- the environment

class Environment:
    """The instances of BFCL API ``classes``, loaded with ``initial_config``, in a bounded worker process.

    Use it as a context manager (or call ``close``): it owns a process. Not
    thread-safe (several environments may be used from several threads); ``run``
    blocks for at most ``time_limit_s`` per call and ``step_time_limit_s`` per
    step (plus a restart and replay when a call hits a bound). ``long_context`` loads the
    scenarios as bfcl-eval's ``long_context`` category does. The function docs
    for validation come from bfcl-eval's data (``bfcl_data``, else
    ``$PROMPTGRID_BFCL_DATA``, else the installed package); the classes always
    come from the installed ``bfcl_eval`` package. ``strict_arguments=True``
    refuses calls whose arguments do not validate against their function doc
    (the ``"strict"`` rule); by default the method decides, as in bfcl-eval
    (module docstring).

    ``ascii_results=False`` gives a dict result as ``json.dumps(result,
    ensure_ascii=False)`` (non-ASCII characters as they are) instead of
    bfcl-eval's ASCII escapes. The bounds of a step (``max_calls_per_step``,
    ``max_step_argument_bytes``, ``step_time_limit_s``), of an episode
    (``episode_time_limit_s``) and of ``state()`` (``max_state_values``,
    ``max_state_depth``, ``max_state_chars``) are described in the module
    docstring.

    Raises ``DatasetError`` for an unknown class or an ``initial_config`` the
    classes cannot load, ``MissingDependencyError``
    when bfcl-eval or a package its classes import (``mpmath`` for
    ``MathAPI``) is missing, ``RunError`` for unusable bounds or a worker that
    cannot start. Once it is built, ``run`` and ``state`` raise
    ``EnvironmentFailure`` when the episode's environment cannot go on.
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
        ascii_results: bool = True,
        max_step_argument_bytes: int = 1_048_576,
        step_time_limit_s: float = 10.0,
        episode_time_limit_s: float = 60.0,
        max_state_values: int = MAX_STATE_VALUES,
        max_state_depth: int = MAX_STATE_DEPTH,
        max_state_chars: int = MAX_STATE_CHARS,
        bfcl_data: str | os.PathLike[str] | None = None,
        strict_arguments: bool = False,
    ) -> None:
        self._process: _Process | None = None
        self._closed = False
        self._in_sync = False  # the worker has answered every request sent (it may go back to the pool)
        self._prefetched: Any = None  # the reply to a state request sent with the last step (run(then_state=))
        self._inbox = bytearray()  # bytes read from the worker ahead of the reply being read
        self.classes = tuple(_check_classes(classes))
        if not isinstance(initial_config, Mapping):
            raise DatasetError(f"initial_config must be an object (class -> state), not {type(initial_config)}.")
        _check_bound("time_limit_s", time_limit_s, 0.01, integer=False)
        _check_bound("memory_limit_mb", memory_limit_mb, 64, integer=True)
        _check_bound("max_calls_per_step", max_calls_per_step, 1, integer=True)
        _check_bound("max_output_chars", max_output_chars, 1, integer=True)
        _check_bound("max_step_argument_bytes", max_step_argument_bytes, 1, integer=True)
        _check_bound("step_time_limit_s", step_time_limit_s, 0.01, integer=False)
        _check_bound("episode_time_limit_s", episode_time_limit_s, 0.01, integer=False)
        _check_bound("max_state_values", max_state_values, 1, integer=True)
        _check_bound("max_state_depth", max_state_depth, 1, integer=True)
        _check_bound("max_state_chars", max_state_chars, 0, integer=True)
        if max_state_depth > _MAX_STATE_DEPTH_ALLOWED:
            raise RunError(f"max_state_depth={max_state_depth!r} is not usable; give a whole number of at most "
                           f"{_MAX_STATE_DEPTH_ALLOWED}.")
        self.long_context = bool(long_context)
        self.time_limit_s = float(time_limit_s)
        self.memory_limit_mb = int(memory_limit_mb)
        self.max_calls_per_step = int(max_calls_per_step)
        self.max_output_chars = int(max_output_chars)
        self.ascii_results = bool(ascii_results)
        self.max_step_argument_bytes = int(max_step_argument_bytes)
        self.step_time_limit_s = float(step_time_limit_s)
        self.episode_time_limit_s = float(episode_time_limit_s)
        self.max_state_values = int(max_state_values)
        self.max_state_depth = int(max_state_depth)
        self.max_state_chars = int(max_state_chars)
        self._initial_config = dict(initial_config)  # copied by the first start's message (below), which restarts reuse
        self._init_message: bytes | None = None
        source = _bfcl(bfcl_data)
        self._doc_names = {name: [doc["name"] for doc in _class_docs(source, name)] for name in self.classes}
        self._parameters: dict[str, Mapping[str, Any]] = {}
        for name in self.classes:  # a later class wins a name two classes share, as in bfcl-eval's executor
            self._parameters.update({doc["name"]: doc["parameters"] for doc in _class_docs(source, name)})
        self.strict_arguments = bool(strict_arguments)
        self._signatures = method_signatures(self.classes)
        self._methods: dict[str, str] = {}
        self._bounds: dict[str, bool] = {}
        self._ran: list[tuple[str, dict[str, Any], bool, str]] = []
        self._starts = 0
        self._start_seconds = 0.0
        self._replayed = 0
        self._peak_kib = 0
        self._episode_seconds = 0.0
        self._step: _Step | None = None
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

    def run(self, calls: Sequence[ToolCall], *, then_state: bool = False) -> list[CallOutcome]:
        """Run one step's calls in order; one ``CallOutcome`` per call, in the same order (see the module
        docstring for what is refused and why). The calls past ``max_calls_per_step``, past
        ``max_step_argument_bytes`` of arguments or after the step's ``step_time_limit_s`` are refused unrun.
        Raises ``EnvironmentFailure`` when the episode's ``episode_time_limit_s`` is spent, a replay after a
        restart gives another result, or the worker cannot be started again.

        The step's calls go to the worker together and their results come back in order, each under the bounds
        it would have had alone: call *k*'s time starts when call *k-1*'s result arrives. Where one hits a bound
        (the worker is stopped) the calls after it go one at a time to the restarted worker, and where the step's
        time runs out between two results the worker is stopped and restarted, so no call runs that would not
        have been sent. ``then_state=True`` asks for the state in the same exchange, for a ``state()`` that
        follows this step (the usual case: the state check after a turn's last step)."""
        if self._closed:
            raise RunError(f"the environment of {', '.join(self.classes)} is closed.")
        self._prefetched = None
        began = time.monotonic()
        left = self.episode_time_limit_s - self._episode_seconds
        if left <= 0:
            raise self._episode_spent()
        self._step = _Step(began + self.step_time_limit_s, began + left, self.max_step_argument_bytes)
        try:
            self._ensure_open()
            return self._run_step(list(calls), then_state)
        finally:
            self._step = None
            self._episode_seconds += time.monotonic() - began

    def _run_step(self, calls: list[Any], then_state: bool) -> list[CallOutcome]:
        step = self._step
        assert step is not None
        entries = self._plan_step(calls)
        outcomes: list[CallOutcome | None] = [entry if isinstance(entry, CallOutcome) else None for entry in entries]
        planned = [(index, entry) for index, entry in enumerate(entries) if isinstance(entry, _Planned)]
        batch = sum(len(plan.message) for _index, plan in planned)
        if planned and self._process is not None and batch <= _PIPELINE_BYTES:
            state = protocol.encode(("state",)) if then_state else b""
            sent = time.monotonic()
            try:
                protocol.write_all(self._process.to_worker, b"".join(plan.message for _i, plan in planned) + state)
            except OSError:
                self._in_sync = False
                planned_left = planned  # the worker is gone: each call below meets it as one would alone
            else:
                planned_left, clean = self._pipelined(planned, outcomes, sent)
                if clean and then_state:
                    self._prefetch_state()
            for index, plan in planned_left:  # one at a time, as alone, on the restarted worker
                outcomes[index] = self._send_one(plan, outcomes, index)
        elif planned:
            for index, plan in planned:
                outcomes[index] = self._send_one(plan, outcomes, index)
        return [outcome for outcome in outcomes if outcome is not None]

    def _plan_step(self, calls: Sequence[Any]) -> list[CallOutcome | _Planned]:
        """Each call of a step planned (``_plan``; the step's bytes counted in ``self._step``), or refused: past
        ``max_calls_per_step``, or by ``_plan``'s checks."""
        return [_refused(call, Refusal.TOO_MANY_CALLS, f"more than {self.max_calls_per_step} calls in one step; "
                         "this one was not run")
                if index >= self.max_calls_per_step else self._plan(call) for index, call in enumerate(calls)]

    def _pipelined(self, planned: list[tuple[int, _Planned]], outcomes: list[CallOutcome | None],
                   started: float) -> tuple[list[tuple[int, _Planned]], bool]:
        """Read the results of calls sent together; returns the calls still to run one at a time (the worker was
        stopped before their turn), and whether the same worker answered every call (then a request sent after
        them is answered next)."""
        step = self._step
        assert step is not None
        process = self._process
        for position, (index, plan) in enumerate(planned):
            if started >= step.episode_deadline:
                self._note_peak_of_busy_worker()
                self._kill()
                raise self._episode_spent()
            if started >= step.deadline:
                # Alone, this call would not have been sent: the worker, which may be running it, is stopped and
                # rebuilt by replay on next use; this call and the ones after it are refused unrun.
                self._kill()
                for later, rest in planned[position:]:
                    outcomes[later] = _refused(rest.call, Refusal.STEP_TIME_LIMIT,
                                               f"the step's environment time ({self.step_time_limit_s:g} s) is "
                                               "spent; this call was not run")
                return [], False
            outcomes[index] = self._finish(plan, started)
            if self._process is not process or not self._in_sync:  # a bound was hit: the rest one at a time
                return planned[position + 1:], False
            started = time.monotonic()
        return [], True

    def _send_one(self, plan: _Planned, outcomes: list[CallOutcome | None], index: int) -> CallOutcome:
        """One planned call sent alone (the deadlines checked first, as for any call)."""
        step = self._step
        assert step is not None
        now = time.monotonic()
        if now >= step.episode_deadline:
            raise self._episode_spent()
        if now >= step.deadline:
            return _refused(plan.call, Refusal.STEP_TIME_LIMIT, f"the step's environment time "
                                                                f"({self.step_time_limit_s:g} s) is spent; this "
                                                                "call was not run")
        self._ensure_open()
        assert self._process is not None
        try:
            protocol.write_all(self._process.to_worker, plan.message)
        except OSError:
            self._in_sync = False
        return self._finish(plan, now)

    def run_script(self, steps: Sequence[Sequence[ToolCall]], states: Sequence[bool]
                   ) -> list[tuple[list[CallOutcome], Any]] | None:
        """Several steps in one exchange with the worker, when the caller knows them all ahead (scoring a
        trajectory): per step its outcomes, and where ``states[i]`` asks for it the state after it as a reply for
        ``state_of``. The outcomes are those ``run`` gives step by step (the same refusals, the same results).

        Returns None, with the environment as it was before (its worker stopped and rebuilt by replay on next
        use), where the exchange cannot stand for the steps one by one: the calls carry more than a pipe's worth
        of arguments, a call took longer than ``time_limit_s``, a step longer than ``step_time_limit_s``, the
        script longer than the episode's time left, or the worker failed on the way. The caller then runs the
        steps one by one, where the bounds act as they do there."""
        if self._closed:
            raise RunError(f"the environment of {', '.join(self.classes)} is closed.")
        if len(states) != len(steps):
            raise ValueError(f"{len(steps)} steps but {len(states)} state flags")
        self._prefetched = None
        left = self.episode_time_limit_s - self._episode_seconds
        if left <= 0:
            return None
        self._ensure_open()
        layout: list[list[CallOutcome | _Planned]] = []
        for calls in steps:
            self._step = _Step(math.inf, math.inf, self.max_step_argument_bytes)  # the bytes bound, counted here
            try:
                layout.append(self._plan_step(calls))
            finally:
                self._step = None
        messages = [plan.message for entries in layout for plan in entries if isinstance(plan, _Planned)]
        messages += [_STATE_REQUEST] * sum(1 for wanted in states if wanted)
        if sum(len(message) for message in messages) > _PIPELINE_BYTES or self._process is None:
            return None
        began = time.monotonic()
        try:
            protocol.write_all(self._process.to_worker, protocol.encode(("script", len(messages))) +
                               b"".join(self._script_order(layout, states)))
        except OSError:
            self._in_sync = False
            self._kill()
            return None
        reply = self._reply(began + left)
        spent = time.monotonic() - began
        results = self._script_results(layout, states, reply, left) if spent <= left else None
        if results is None:
            self._kill()  # rebuilt by replaying the calls that ran before the script, on next use
            return None
        self._episode_seconds += spent
        return results

    @staticmethod
    def _script_order(layout: list[list[CallOutcome | _Planned]], states: Sequence[bool]) -> Iterator[bytes]:
        for entries, wanted in zip(layout, states, strict=True):
            yield from (plan.message for plan in entries if isinstance(plan, _Planned))
            if wanted:
                yield _STATE_REQUEST

    def _script_results(self, layout: list[list[CallOutcome | _Planned]], states: Sequence[bool], reply: Any,
                        left: float) -> list[tuple[list[CallOutcome], Any]] | None:
        """The outcomes of a script's reply, or None where it cannot stand for the steps one by one."""
        if not (isinstance(reply, tuple) and len(reply) == 3 and reply[0] == "script"):
            return None
        replies, seconds = list(reply[1]), list(reply[2])
        if len(replies) != len(seconds) or sum(seconds) > left:
            return None
        ran: list[tuple[str, dict[str, Any], bool, str]] = []
        results: list[tuple[list[CallOutcome], Any]] = []
        answers = iter(zip(replies, seconds, strict=True))
        for entries, wanted in zip(layout, states, strict=True):
            outcomes = self._script_step(entries, answers, ran)
            if outcomes is None:
                return None
            answer = next(answers, None) if wanted else None
            state = None if answer is None else answer[0]
            if wanted and not (isinstance(state, tuple) and state[:1] in (("state",), (protocol.STATE_TOO_LARGE,))):
                return None
            results.append((outcomes, state))
        if next(answers, None) is not None:
            return None
        self._ran.extend(ran)
        return results

    def _script_step(self, entries: list[CallOutcome | _Planned], answers: Iterator[tuple[Any, float]],
                     ran: list[tuple[str, dict[str, Any], bool, str]]) -> list[CallOutcome] | None:
        """One step's outcomes from a script's replies (taken from ``answers`` in order; the calls that ran added
        to ``ran``), or None where a reply is missing, is not a call's, or took longer than a bound allows."""
        outcomes: list[CallOutcome] = []
        step_seconds = 0.0
        for plan in entries:
            if not isinstance(plan, _Planned):
                outcomes.append(plan)
                continue
            answer, took = next(answers, (None, 0.0))
            step_seconds += float(took)
            if took > self.time_limit_s or step_seconds > self.step_time_limit_s:
                return None  # alone, this call would have been stopped at its bound
            if isinstance(answer, tuple) and answer[0] == protocol.OK and len(answer) == 3:
                ran.append((plan.name, plan.given, bool(answer[1]), str(answer[2])))
                outcomes.append(CallOutcome(plan.call, bool(answer[1]), str(answer[2]), None, float(took),
                                            plan.argument_problem))
            elif isinstance(answer, tuple) and answer[0] == protocol.REFUSED:
                outcomes.append(_refused(plan.call, Refusal.UNKNOWN_FUNCTION, str(answer[2]), float(took)))
            else:
                return None
        return outcomes

    def state_of(self, reply: Any) -> dict[str, dict[str, Any]]:
        """The state a ``run_script`` reply holds, as ``state()`` gives it (``EnvironmentFailure`` where the state
        was past the bounds)."""
        self._prefetched = reply
        return self.state()

    def _prefetch_state(self) -> None:
        """The reply to the ``state`` request sent after the step's calls, kept for ``state()``. A worker that
        could not build it is stopped now (the next use restarts it and replays its calls)."""
        reply = self._reply(time.monotonic() + max(_STATE_TIMEOUT_S, self.time_limit_s))
        if isinstance(reply, tuple) and reply[0] in ("state", protocol.STATE_TOO_LARGE):
            self._prefetched = reply
        else:
            self._kill()

    def _episode_spent(self) -> EnvironmentFailure:
        return EnvironmentFailure(f"the episode's environment time ({self.episode_time_limit_s:g} s, "
                                  "episode_time_limit_s) is spent; the episode cannot go on.",
                                  reason="episode_time_limit")

    def state(self) -> dict[str, dict[str, Any]]:
        """Per class, its instance's public attributes (those bfcl-eval's state checker compares) as plain data:
        dicts, lists, tuples, sets and scalars; a simulated directory as ``{"type": "directory", "name", "contents"}``
        and a file as ``{"type": "file", "name", "content"}`` (they compare by name and contents, as in bfcl-eval).
        An attribute compares equal here exactly when it does in bfcl-eval's state checker.

        Within the bounds (``max_state_values``, ``max_state_depth``, ``max_state_chars``), counted as the state is
        turned into data; past one it raises ``EnvironmentFailure`` (``state_too_large``) at once, having built at
        most that much. Also ``EnvironmentFailure`` when the worker runs out of memory building the state
        (``out_of_memory``) or does not answer (``worker_failed``)."""
        reply, self._prefetched = self._prefetched, None
        if reply is None:
            self._ensure_open()
            reply = self._request(("state",), time.monotonic() + max(_STATE_TIMEOUT_S, self.time_limit_s))
        if isinstance(reply, tuple) and reply[0] == "state":
            return reply[1]
        where = f"the environment of {', '.join(self.classes)}"
        if isinstance(reply, tuple) and reply[0] == protocol.STATE_TOO_LARGE:
            raise EnvironmentFailure(
                f"{where} could not report its state: it holds {str(reply[1])[:200]} (max_state_values="
                f"{self.max_state_values}, max_state_depth={self.max_state_depth}, max_state_chars="
                f"{self.max_state_chars}; raise them to report larger states).", reason="state_too_large")
        self._kill()  # started again, with the calls replayed, if the environment is used again
        if isinstance(reply, tuple) and reply[0] == protocol.MEMORY:
            raise EnvironmentFailure(f"{where} could not report its state: it needs more than memory_limit_mb="
                                     f"{self.memory_limit_mb}.", reason="out_of_memory")
        raise EnvironmentFailure(f"{where} could not report its state ({_why(reply)}).", reason="worker_failed")

    def usage(self) -> EnvironmentUsage:
        """Starts, calls and the worker's peak memory so far. Starts no worker: after an ``EnvironmentFailure``
        it reports what there was."""
        if self._closed:
            raise RunError(f"the environment of {', '.join(self.classes)} is closed.")
        self._note_peak()
        return EnvironmentUsage(starts=self._starts, start_seconds=self._start_seconds, calls_run=len(self._ran),
                                calls_replayed=self._replayed,
                                peak_memory_mb=round(self._peak_kib / 1024, 1), bounds=dict(self._bounds))

    def park(self) -> None:
        """Let the worker go while the environment waits a long time (a batch round): the next call starts a
        worker and replays the calls that ran, as after a restart. A worker in step goes back to its fork
        server's pool, its pristine state put back; any other one ends. Its peak memory is read first."""
        if self._closed or self._process is None:
            return
        self._note_peak()
        self._let_go()

    def close(self) -> None:
        """End the worker process. Safe to call twice; the environment cannot be used afterwards."""
        if self._closed:
            return
        self._closed = True
        self._let_go()

    def _let_go(self) -> None:
        """Part with the worker: one in step goes back to its fork server's pool (it puts its pristine state back
        while this process goes on, and the next environment reads its answer to the reset first, ``_start``);
        any other one ends."""
        process = self._process
        if isinstance(process, _Forked) and self._in_sync and not self._inbox:
            self._process = None
            try:
                protocol.write_all(process.to_worker, _RESET)
            except OSError:
                process.end()
                return
            process.server.give_back(process, self.memory_limit_mb * 1024 * 1024)
            return
        self._kill()

    def __del__(self) -> None:  # a forgotten close must not leave a process behind
        try:
            process, self._process = getattr(self, "_process", None), None
            if process is not None:
                process.end_later()
        except Exception:  # interpreter shutdown: modules may be gone
            pass

    # ----------------------------------------------------------------- one call

    def _plan(self, call: Any) -> CallOutcome | _Planned:
        """A call made ready to send (its message encoded, the step's argument bytes counted), or its refusal."""
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
        prepared = self._prepare(call, name, arguments)
        if isinstance(prepared, CallOutcome):
            return prepared
        call, given, argument_problem = prepared
        message = protocol.encode(("call", name, given))
        step = self._step
        if step is not None:
            if len(message) > step.bytes_left:
                return _refused(call, Refusal.STEP_ARGUMENT_BYTES,
                                f"the calls of this step carry more than {self.max_step_argument_bytes} bytes of "
                                "arguments with this one; it was not run")
            step.bytes_left -= len(message)
        return _Planned(call, name, given, argument_problem, message)

    def _finish(self, plan: _Planned, started: float) -> CallOutcome:
        """The outcome of a call sent at ``started`` (or whose turn in the worker began then): its reply read
        within the call's bounds; past one, the worker is stopped and restarted, the call refused."""
        call, name, given, argument_problem = plan.call, plan.name, plan.given, plan.argument_problem
        step = self._step
        bound = started + self.time_limit_s
        deadline = min(bound, step.deadline, step.episode_deadline) if step is not None else bound
        reply = self._reply(deadline)
        seconds = time.monotonic() - started
        if isinstance(reply, tuple) and reply[0] == protocol.OK and len(reply) == 3:
            _kind, ok, output = reply
            self._ran.append((name, given, bool(ok), str(output)))
            return CallOutcome(call, bool(ok), str(output), None, seconds, argument_problem)
        if isinstance(reply, tuple) and reply[0] == protocol.REFUSED:
            return _refused(call, Refusal.UNKNOWN_FUNCTION, str(reply[2]), seconds)
        if reply is _TIMEOUT and deadline < bound and step is not None and deadline == step.episode_deadline:
            self._note_peak_of_busy_worker()
            self._kill()  # started again, with the calls replayed, if the environment is used again
            raise self._episode_spent()
        if reply is _TIMEOUT and deadline < bound:
            refusal, why = Refusal.STEP_TIME_LIMIT, (f"{name} was stopped when the step's environment time "
                                                     f"({self.step_time_limit_s:g} s) ran out")
        elif reply is _TIMEOUT:
            refusal, why = Refusal.TIME_LIMIT, f"{name} did not finish within {self.time_limit_s:g} s and was stopped"
        elif isinstance(reply, tuple) and reply[0] == protocol.MEMORY:
            refusal, why = Refusal.MEMORY_LIMIT, (f"{name} needed more than {self.memory_limit_mb} MB of memory "
                                                  "and was stopped")
        else:
            refusal, why = Refusal.CRASHED, f"{name} stopped the environment ({_why(reply)})"
        self._note_peak_of_busy_worker()
        self._kill()
        self._restart()
        return _refused(call, refusal, why + "; the state is as it was before the call", seconds)

    def _prepare(self, call: Any, name: str, arguments: Any
                 ) -> CallOutcome | tuple[ToolCall, dict[str, Any], str | None]:
        """A call of a known function made ready to send: (the call with its positional arguments bound, a copy of
        its keyword arguments, what the strict rule finds wrong with them), or the outcome of its refusal."""
        positional = getattr(call, "positional", ())
        if not isinstance(arguments, Mapping) or not isinstance(positional, tuple):
            return _refused(call, Refusal.BAD_ARGUMENTS, f"the arguments of {name} must be an object of "
                                                         "parameter names and values")
        shape = _shape_problem({"positional": list(positional), "keywords": dict(arguments)}) if positional \
            else _shape_problem(dict(arguments))
        if shape:
            return _refused(call, Refusal.BAD_ARGUMENTS, f"the arguments of {name} hold {shape}")
        if positional:
            bound = bind_positional(ToolCall(name, dict(arguments), positional), self._signatures.get(name))
            if isinstance(bound, str):
                return _refused(call, Refusal.BAD_ARGUMENTS, bound)
            call = bound
        given = dict(call.arguments if positional else arguments)
        owner = self._methods[name]
        also = {parameter: kind for (cls, parameter), kind in _ALSO_ACCEPTED.items() if cls == owner}
        problem = _doc_problem(name, given, self._parameters[name], also)
        if problem and self.strict_arguments:
            return replace(_refused(call, Refusal.BAD_ARGUMENTS, problem), argument_problem=problem)
        given = copy.deepcopy(given)  # bounded (checked above); the log must not change with the caller's dict
        return call, given, problem

    # ----------------------------------------------------------------- the process

    def _start(self, reuse: bool = True) -> None:
        if not _bfcl_installed():
            raise MissingDependencyError("BFCL's multi-turn environments", "pip install --no-deps bfcl-eval")
        started = time.monotonic()
        if self._init_message is None:
            # Encoded once: the pickle is this environment's own copy of the initial state (a caller's later change
            # to its dict changes nothing here), and every restart sends the same bytes.
            self._init_message = protocol.encode({
                "sys_path": list(_sys_path()),
                "classes": list(self.classes),
                "modules": {name: f"{_BACKEND}.{ENVIRONMENT_CLASSES[name][0]}" for name in self.classes},
                "stateless": sorted(_STATELESS),
                "initial_config": self._initial_config,
                "long_context": self.long_context,
                "doc_names": self._doc_names,
                "memory_limit_bytes": self.memory_limit_mb * 1024 * 1024,
                "time_limit_s": self.time_limit_s,
                "max_output_chars": self.max_output_chars,
                "ascii_results": self.ascii_results,
                "state_bounds": (self.max_state_values, self.max_state_depth, self.max_state_chars),
            })
            self._initial_config = {}  # not needed again: the message holds it
        memory = self.memory_limit_mb * 1024 * 1024
        self._inbox = bytearray()
        self._process, unsent = _new_process(self._init_message, memory, reuse=reuse)
        reused = getattr(self._process, "reset_pending", False)
        if reused:  # its answer to the reset comes first; any other answer: it ended, and a fresh one starts
            self._process.reset_pending = False  # type: ignore[attr-defined]
            if self._reply(started + _START_TIMEOUT_S) != ("reset", True):
                self._kill()
                self._start(reuse=False)
                return
        self._starts += 1
        reply = self._request(unsent, started + _START_TIMEOUT_S)
        self._start_seconds += time.monotonic() - started
        if isinstance(reply, tuple) and reply[0] == protocol.READY:
            self._methods = dict(reply[1])
            self._bounds = dict(reply[2])
            self._in_sync = True
            return
        self._kill()
        if reused:  # a worker that could not take this init after all: a fresh one says what is wrong
            self._starts -= 1
            self._start(reuse=False)
            return
        raise self._start_error(reply)

    def _start_error(self, reply: Any) -> PromptgridError:
        """What a worker's answer to ``init`` other than ready means, as the error to raise."""
        if isinstance(reply, tuple) and reply[0] == protocol.ERROR and len(reply) == 5:
            _kind, error, message, module, phase = reply
            if phase == "load":
                return DatasetError(f"the initial_config of {', '.join(self.classes)} cannot be loaded by bfcl-eval's "
                                    f"classes: {error}: {str(message)[:500]}.")
            if error in ("ModuleNotFoundError", "ImportError") and module:
                package = "bfcl-eval" if str(module).startswith("bfcl_eval") else str(module).split(".")[0]
                return MissingDependencyError(f"BFCL's {', '.join(self.classes)} environment (module {module})",
                                              f"pip install {'--no-deps ' if package == 'bfcl-eval' else ''}"
                                              f"{package}")
            return RunError(f"the environment of {', '.join(self.classes)} could not be set up: {error}: "
                            f"{str(message)[:500]}.")
        if isinstance(reply, tuple) and reply[0] == protocol.MEMORY:
            return RunError(f"the initial state of {', '.join(self.classes)} does not fit in memory_limit_mb="
                            f"{self.memory_limit_mb}; give the environment more memory.")
        return RunError(f"the environment's worker process did not start ({_why(reply)}).")

    def _restart(self) -> None:
        """A fresh worker brought to the state the calls that ran have made (they are replayed in order). Only
        after the first start: every failure is an ``EnvironmentFailure``."""
        where = f"the environment of {', '.join(self.classes)}"
        try:
            self._start()
        except PromptgridError as exc:
            raise EnvironmentFailure(f"{where} could not be started again: {exc}", reason="worker_failed") from None
        if not self._ran:
            return
        deadline = time.monotonic() + _START_TIMEOUT_S + self.time_limit_s * len(self._ran)
        reply = self._request(("replay", [(name, arguments) for name, arguments, _ok, _out in self._ran]), deadline)
        if not (isinstance(reply, tuple) and reply[0] == "replayed" and len(reply[1]) == len(self._ran)):
            self._kill()
            raise EnvironmentFailure(f"{where} could not be rebuilt by replaying its {len(self._ran)} calls "
                                     f"({_why(reply)}).", reason="worker_failed")
        self._replayed += len(self._ran)
        for number, ((name, _arguments, ok, output), result) in enumerate(zip(self._ran, reply[1], strict=True)):
            if tuple(result) != (protocol.OK, ok, output):
                self._kill()
                raise EnvironmentFailure(f"replaying call {number + 1} ({name}) of {where} gave another result than "
                                         "the first time; the environment is not deterministic and the episode "
                                         "cannot go on.", reason="replay_differs")

    def _request(self, message: Any, deadline: float) -> Any:
        """Send ``message`` (or its ``protocol.encode``-d bytes) and wait for the reply until ``deadline``: the
        reply, ``_TIMEOUT`` or ``_ENDED``."""
        if self._process is None:
            return _ENDED
        try:
            protocol.write_all(self._process.to_worker,
                               message if isinstance(message, bytes) else protocol.encode(message))
        except OSError:  # BrokenPipeError: the worker is gone
            self._in_sync = False
            return _ENDED
        return self._reply(deadline)

    def _reply(self, deadline: float) -> Any:
        """The worker's next reply, ``_TIMEOUT`` or ``_ENDED``; after either of those the worker is out of step
        (a reply may still come) and is never reused."""
        reply = self._read_reply(deadline)
        if reply is _TIMEOUT or reply is _ENDED:
            self._in_sync = False
        return reply

    def _read_reply(self, deadline: float) -> Any:
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
        """``size`` bytes from the worker, from what was read ahead first (a worker writes the results of calls
        sent together at once), else read as they come, as much as is there; ``_TIMEOUT`` or ``_ENDED``."""
        assert self._process is not None
        fd = self._process.from_worker
        inbox = self._inbox
        while len(inbox) < size:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return _TIMEOUT
            if not _readable(fd, remaining):
                continue
            try:
                chunk = os.read(fd, max(size - len(inbox), 1 << 16))
            except OSError:
                return _ENDED
            if not chunk:
                return _ENDED
            inbox += chunk
        data = bytes(inbox[:size])
        del inbox[:size]
        return data

    def _note_peak(self) -> None:
        if self._process is None:
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
        self._inbox = bytearray()
        process, self._process = self._process, None
        if process is not None:
            process.end()

    def _ensure_open(self) -> None:
        if self._closed:
            raise RunError(f"the environment of {', '.join(self.classes)} is closed.")
        if self._process is None:
            self._restart()


def _readable(fd: int, timeout_s: float) -> bool:
    """Whether ``fd`` can be read (data, or its end) within ``timeout_s``: one ``poll`` (no descriptor of its own
    to create and close, as a selector has, and no limit on the descriptor's number, as ``select`` has)."""
    poll = getattr(select, "poll", None)
    if poll is None:  # pragma: no cover - no poll(): select's descriptor limit applies
        return bool(select.select([fd], [], [], timeout_s)[0])
    poller = poll()
    poller.register(fd, select.POLLIN)
    try:
        return bool(poller.poll(max(0, math.ceil(timeout_s * 1000))))
    except InterruptedError:  # pragma: no cover - retried by PEP 475; kept for older systems
        return False


@dataclass
class _Planned:
    """A call ready to send: the call (positional arguments bound), its name, a copy of its keyword arguments,
    what the strict rule finds wrong with them, and its encoded ``call`` message."""

    call: Any
    name: str
    given: dict[str, Any]
    argument_problem: str | None
    message: bytes


@dataclass
class _Step:
    """What is left of the step ``run`` is in: its deadline, the episode's, and the bytes of arguments."""

    deadline: float
    episode_deadline: float
    bytes_left: int


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
