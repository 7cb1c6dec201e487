"""``jsonl:PATH``: bring your own cases, one JSON object per line.

The record is BFCL's entry with its possible answer merged in (schema and
examples in docs/datasets.md)::

    {"id": "weather_de_1",
     "question": [[{"role": "user", "content": "Wie ist das Wetter in München?"}]],
     "function": [{"name": "weather.get_current", "description": "...",
                   "parameters": {"type": "dict", "properties": {"city": {"type": "string"}},
                                  "required": ["city"]}}],
     "ground_truth": [{"weather.get_current": {"city": ["München", "Munich"]}}],
     "category": "simple", "language": "de", "group": "weather_1"}

``question`` may also be a flat list of messages or a plain string (one user
message). ``ground_truth`` empty or absent means no call is expected
(category ``irrelevance``); ``category`` is inferred from the counts when
absent. Keys the schema does not know are kept in ``Case.extra``.

A malformed file is reported at once: every problem (up to
``MAX_PROBLEMS``) with file, line, field and how to fix it, in one
DatasetError, never a traceback.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from promptgrid.errors import DatasetError, closest
from promptgrid.records import CATEGORIES, Case
from promptgrid.safeio import atomic_output, read_json_lines

__all__ = ["MAX_PROBLEMS", "case_to_record", "load_jsonl", "write_jsonl"]

MAX_PROBLEMS = 20
ROLES = ("system", "user", "assistant")
KNOWN_KEYS = ("id", "question", "function", "ground_truth", "category", "language", "group")
_SCHEMA_HINT = "see docs/datasets.md for the record schema"
_EXAMPLE_QUESTION = '[[{"role": "user", "content": "..."}]]'
_T = TypeVar("_T")


class _TooMany(Exception):
    """Raised internally once MAX_PROBLEMS problems are collected."""


class _Problems:
    """Collects ``file:line: field: message`` lines; stops the scan when full."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.items: list[str] = []
        self.truncated = False

    def add(self, line: int, field: str, message: str) -> None:
        if len(self.items) >= MAX_PROBLEMS:
            self.truncated = True
            raise _TooMany
        where = f"{self.path}:{line}"
        self.items.append(f"{where}: {field}: {message}" if field else f"{where}: {message}")

    def raise_if_any(self) -> None:
        if not self.items:
            return
        count = f"{len(self.items)}{'+' if self.truncated else ''}"
        head = f"jsonl dataset {self.path} has {count} problem{'s' if len(self.items) != 1 else ''} ({_SCHEMA_HINT}):"
        tail = [f"  ... stopped after {MAX_PROBLEMS} problems; fix these and load again."] if self.truncated else []
        raise DatasetError("\n".join([head, *("  " + item for item in self.items), *tail]))


def _type_name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


# --------------------------------------------------------------------------- record parts


def _messages(value: Any, line: int, problems: _Problems) -> list[dict[str, Any]] | None:
    """The messages of a single-turn question (string, flat list, or BFCL list of turns)."""
    if isinstance(value, str):
        if not value.strip():
            problems.add(line, "question", f"is an empty string; give the user's query, or {_EXAMPLE_QUESTION}.")
            return None
        return [{"role": "user", "content": value}]
    found = _turn(value, line, problems)
    if found is None:
        return None
    messages, prefix = found
    ok = True
    for i, msg in enumerate(messages):
        ok = _message(msg, f"{prefix}[{i}]", line, problems) and ok
    if ok and not any(m.get("role") == "user" for m in messages):
        problems.add(line, prefix, "has no user message; add {\"role\": \"user\", \"content\": \"...\"}.")
        ok = False
    return [dict(m) for m in messages] if ok else None


def _turn(value: Any, line: int, problems: _Problems) -> tuple[list[Any], str] | None:
    """The one turn's messages of a list question, and the field that holds them (``question[0]``, or
    ``question`` for a flat list); None, reported, when the list has another shape."""
    if not isinstance(value, list) or not value:
        problems.add(line, "question", f"must be a non-empty list of turns like {_EXAMPLE_QUESTION} "
                                       f"(or a flat list of messages, or a string); got {_type_name(value)}.")
        return None
    if all(isinstance(turn, list) for turn in value):
        if len(value) > 1:
            problems.add(line, "question", f"has {len(value)} turns; only single-turn cases are supported. "
                                           "Put all messages of the one turn in question[0].")
            return None
        if not value[0]:
            problems.add(line, "question[0]", "is an empty turn; add at least one user message.")
            return None
        return value[0], "question[0]"
    if all(isinstance(m, dict) for m in value):
        return value, "question"
    problems.add(line, "question", "mixes messages and lists; use either a list of turns "
                                   f"{_EXAMPLE_QUESTION} or a flat list of messages.")
    return None


def _message(msg: Any, field: str, line: int, problems: _Problems) -> bool:
    """Check one message (an object with a known role and string content); False when a problem was reported."""
    if not isinstance(msg, dict):
        problems.add(line, field, f'must be a message object {{"role": ..., "content": ...}}; got {_type_name(msg)}.')
        return False
    ok = True
    role = msg.get("role")
    if role not in ROLES:
        hint = closest(str(role), ROLES) if isinstance(role, str) else ""
        problems.add(line, f"{field}.role", f"must be one of {', '.join(ROLES)}; got {role!r}.{hint}")
        ok = False
    if not isinstance(msg.get("content"), str):
        problems.add(line, f"{field}.content", f"must be a string; got {_type_name(msg.get('content'))}.")
        ok = False
    return ok


def _function(fn: Any, field: str, line: int, problems: _Problems) -> bool:
    """Minimal check of one BFCL JSON-schema function dict (name, parameters.type, properties)."""
    if not isinstance(fn, dict):
        problems.add(line, field, f"must be a function object with name and parameters; got {_type_name(fn)}.")
        return False
    ok = True
    if not isinstance(fn.get("name"), str) or not fn.get("name"):
        problems.add(line, f"{field}.name", "is missing or not a non-empty string; name the function, "
                                            'e.g. "weather.get_current".')
        ok = False
    if "description" in fn and not isinstance(fn["description"], str):
        problems.add(line, f"{field}.description", f"must be a string; got {_type_name(fn['description'])}.")
        ok = False
    return _parameters(fn.get("parameters"), field, line, problems) and ok


def _parameters(params: Any, field: str, line: int, problems: _Problems) -> bool:
    """Check the ``parameters`` schema of the function at ``field`` (type, properties, required)."""
    if not isinstance(params, dict):
        problems.add(line, f"{field}.parameters", 'is missing or not an object; use {"type": "dict", '
                                                  '"properties": {...}, "required": [...]}.')
        return False
    ok = True
    if not isinstance(params.get("type"), str):
        problems.add(line, f"{field}.parameters.type", 'is missing; BFCL uses "dict" (JSON Schema: "object").')
        ok = False
    props = params.get("properties")
    if not isinstance(props, dict):
        problems.add(line, f"{field}.parameters.properties", "is missing or not an object mapping each "
                                                             'parameter name to {"type": ..., "description": ...}.')
        return False
    for name, prop in props.items():
        if not isinstance(prop, dict) or not isinstance(prop.get("type"), str):
            problems.add(line, f"{field}.parameters.properties.{name}",
                         'needs a "type" string (string, integer, float, boolean, array, dict).')
            ok = False
    required = params.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        problems.add(line, f"{field}.parameters.required", "must be a list of parameter names.")
        ok = False
    else:
        for r in required:
            if r not in props:
                problems.add(line, f"{field}.parameters.required",
                             f"names {r!r}, which is not in properties.{closest(r, props)}")
                ok = False
    return ok


def _functions(
    value: Any, line: int, problems: _Problems
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]] | None:
    if isinstance(value, dict):
        problems.add(line, "function", "must be a list of function objects; wrap the object in [ ].")
        return None
    if not isinstance(value, list) or not value:
        problems.add(line, "function", f"must be a non-empty list of BFCL function objects; got {_type_name(value)}.")
        return None
    ok = True
    by_name: dict[str, dict[str, Any]] = {}
    for i, fn in enumerate(value):
        valid = _function(fn, f"function[{i}]", line, problems)
        ok = ok and valid
        if valid:
            if fn["name"] in by_name:
                problems.add(line, f"function[{i}].name",
                             f"{fn['name']!r} appears twice; function names must be unique.")
                ok = False
            by_name[fn["name"]] = fn
    return (list(value), by_name) if ok else None


def _ground_truth(value: Any, functions: Mapping[str, dict[str, Any]] | None, line: int,
                  problems: _Problems) -> list[dict[str, Any]] | None:
    if value is None:
        return []
    if not isinstance(value, list):
        problems.add(line, "ground_truth", 'must be a list of calls like [{"func": {"param": [value, ...]}}] '
                                           f"(empty for no call); got {_type_name(value)}.")
        return None
    ok = True
    for i, call in enumerate(value):
        ok = _expected_call(call, f"ground_truth[{i}]", functions, line, problems) and ok
    return list(value) if ok else None


def _expected_call(call: Any, field: str, functions: Mapping[str, dict[str, Any]] | None, line: int,
                   problems: _Problems) -> bool:
    """Check one ground-truth call against the record's functions (None: they are broken, and reported)."""
    if not isinstance(call, dict) or len(call) != 1:
        problems.add(line, field, 'must be an object with exactly one key, the function name: '
                                  '{"func": {"param": [acceptable values]}}.')
        return False
    ((name, args),) = call.items()
    if not isinstance(args, dict):
        problems.add(line, f"{field}.{name}", f"must map parameter names to lists of acceptable values; "
                                              f"got {_type_name(args)}.")
        return False
    if functions is None:  # the function list is broken; its problems are reported already
        return True
    fn = functions.get(name)
    if fn is None:
        problems.add(line, field, f"calls {name!r}, which is not in this record's function list."
                                  f"{closest(name, functions)} Add the function or fix the name.")
        return False
    ok = True
    props = fn["parameters"]["properties"]
    for param, accepted in args.items():
        if param not in props:
            problems.add(line, f"{field}.{name}.{param}", f"is not a parameter of {name}.{closest(param, props)}")
            ok = False
        elif not isinstance(accepted, list) or not accepted:
            problems.add(line, f"{field}.{name}.{param}", "must be a non-empty list of acceptable values "
                                                          f"(write [{json.dumps(accepted, ensure_ascii=False)}]"
                                                          ' for one value; add "" if it may be omitted).')
            ok = False
    for param in fn["parameters"].get("required", []):
        if param not in args:
            problems.add(line, f"{field}.{name}",
                         f"omits required parameter {param!r}; list its acceptable values.")
            ok = False
    return ok


def _infer_category(ground_truth: list[dict[str, Any]], n_functions: int) -> str:
    if not ground_truth:
        return "irrelevance"
    if len(ground_truth) == 1:
        return "simple" if n_functions == 1 else "multiple"
    return "parallel" if n_functions == 1 else "parallel_multiple"


def _part(obj: Mapping[str, Any], key: str, check: Callable[[Any, int, _Problems], _T | None], line: int,
          problems: _Problems, missing: str) -> _T | None:
    """``check`` of the record's ``key``; None, with ``missing`` reported, when the record has no ``key``."""
    if key not in obj:
        problems.add(line, key, missing)
        return None
    return check(obj[key], line, problems)


def _category_ok(category: Any, ground_truth: list[dict[str, Any]] | None, line: int, problems: _Problems) -> bool:
    """Check a given category (None: inferred): a known one, and as many expected calls as it says."""
    if category is None:
        return True
    if category not in CATEGORIES:
        problems.add(line, "category", f"must be one of {', '.join(CATEGORIES)}; got {category!r}."
                                       f"{closest(str(category), CATEGORIES)} Leave it out to infer it.")
        return False
    if ground_truth is not None and (category == "irrelevance") != (not ground_truth):
        expected = "empty (no call expected)" if category == "irrelevance" else "at least one call"
        problems.add(line, "category", f"is {category!r}, so ground_truth must have {expected}; fix one of them.")
        return False
    return True


def _record(obj: Any, line: int, problems: _Problems) -> Case | None:
    if not isinstance(obj, dict):
        problems.add(line, "", f"must be a JSON object (one record per line); got {_type_name(obj)}.")
        return None
    ok = True
    case_id = obj.get("id")
    if isinstance(case_id, int) and not isinstance(case_id, bool):
        case_id = str(case_id)
    if not isinstance(case_id, str) or not case_id.strip():
        problems.add(line, "id", "is missing or not a non-empty string; give every record a unique id.")
        ok = False
    messages = _part(obj, "question", _messages, line, problems,
                     f"is missing; add the user's query, e.g. {_EXAMPLE_QUESTION}.")
    fns = _part(obj, "function", _functions, line, problems,
                "is missing; add the list of functions offered to the model.")
    ground_truth = _ground_truth(obj.get("ground_truth"), fns[1] if fns else None, line, problems)
    language = obj.get("language", "en")
    if not isinstance(language, str) or not language.strip():
        problems.add(line, "language", f'must be a language code string such as "de"; got {language!r}.')
        ok = False
    group = obj.get("group")
    if group is None:
        group = case_id
    elif not isinstance(group, str):
        problems.add(line, "group", f"must be a string; got {_type_name(group)}.")
        ok = False
    category = obj.get("category")
    if not _category_ok(category, ground_truth, line, problems):
        ok = False
    if not (ok and messages is not None and fns is not None and ground_truth is not None):
        return None
    # ok implies both are strings; the checks narrow their types for mypy.
    if not (isinstance(case_id, str) and isinstance(group, str)):  # pragma: no cover - excluded by ok
        return None
    return Case(
        id=case_id,
        category=category or _infer_category(ground_truth, len(fns[0])),
        turns=tuple(messages),
        functions=tuple(fns[0]),
        ground_truth=tuple(ground_truth),
        language=language,
        group=group,
        source="jsonl",
        extra={k: v for k, v in obj.items() if k not in KNOWN_KEYS},
    )


# --------------------------------------------------------------------------- files


def load_jsonl(path: str | os.PathLike[str]) -> tuple[Case, ...]:
    """Cases from a JSONL file; every problem found is reported in one DatasetError."""
    file = Path(path).expanduser()
    shown = str(path)
    if not file.exists():
        raise DatasetError(f"jsonl dataset file {shown} not found (looked at {file.resolve()}). "
                           "Give the path to a .jsonl file: --dataset jsonl:PATH.")
    if not file.is_file():
        raise DatasetError(f"jsonl dataset {shown} is not a file; give the path to a .jsonl file.")
    problems = _Problems(shown)
    cases: list[Case] = []
    first_line: dict[str, int] = {}
    try:
        with file.open("rb") as handle:
            for line in read_json_lines(handle):
                lineno, obj = line.number, line.value
                if line.error is not None:
                    problems.add(lineno, "", f"{line.error}.")
                    continue
                case = _record(obj, lineno, problems)
                if case is None:
                    continue
                if case.id in first_line:
                    problems.add(lineno, "id",
                                 f"{case.id!r} is already used on line {first_line[case.id]}; ids must be unique.")
                    continue
                first_line[case.id] = lineno
                cases.append(case)
    except _TooMany:
        pass
    problems.raise_if_any()
    if not cases:
        raise DatasetError(f"jsonl dataset {shown} holds no records; write one JSON object per line ({_SCHEMA_HINT}).")
    return tuple(cases)


def case_to_record(case: Case) -> dict[str, Any]:
    """The JSONL record of a case (what ``load_jsonl`` reads back into an equal case)."""
    record: dict[str, Any] = {
        "id": case.id,
        "question": [[dict(m) for m in case.turns]],
        "function": [dict(f) for f in case.functions],
        "ground_truth": [dict(c) for c in case.ground_truth],
        "category": case.category,
        "language": case.language,
        "group": case.group or case.id,
    }
    clash = sorted(set(case.extra) & set(KNOWN_KEYS))
    if clash:
        raise DatasetError(f"case {case.id!r}: extra keys {clash} clash with record fields; rename them.")
    record.update(case.extra)
    return record


def write_jsonl(cases: Iterable[Case], path: str | os.PathLike[str]) -> Path:
    """Write cases as a JSONL dataset (UTF-8, one record per line); returns the path.

    Handy to start your own dataset from ``mini`` or a BFCL category:
    ``write_jsonl(load_dataset("mini:de"), "my_cases.jsonl")``.
    """
    file = Path(path).expanduser()
    with atomic_output(file) as fh:  # never half a file; a symlink, a FIFO or a device is respected
        for case in cases:
            fh.write(json.dumps(case_to_record(case), ensure_ascii=False) + "\n")
    return file
