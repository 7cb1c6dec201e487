"""Multi-turn conversations as records: BFCL V4's four multi-turn categories and ``jsonl:`` files.

``load_conversations(spec)`` understands::

    bfcl:multi_turn_base           200 entries (read from bfcl-eval's data files, never copied)
    bfcl:multi_turn_miss_func      200: a function is held out until a later turn
    bfcl:multi_turn_miss_param     200: a turn lacks a parameter the model must ask for
    bfcl:multi_turn_long_context   200: the environments load with long-context state
    jsonl:PATH                     your own conversations, one JSON object per line (docs/conversations.md)
    mini-mt[:de,ja]                built in: 24 conversations x 9 languages, localized (``_mini_mt``)

A ``Conversation`` holds its user turns, the API classes it runs against and
their initial state, the function docs the model sees, and per turn the
ground-truth calls. Ground-truth call strings such as ``"cd(folder='doc')"``
are parsed, never evaluated: ``ast.parse`` and ``ast.literal_eval`` of each
argument (``parse_call``); a positional argument takes the name of the
parameter at its position in the method's signature, as Python binds it in
bfcl-eval's ``eval`` (``"sort('report.pdf')"`` is
``sort(file_name='report.pdf')``).

What bfcl-eval's generation pipeline does to an entry, and this module does
too, so that prompts built from a ``Conversation`` match the leaderboard's:

* the docs are those of the involved classes, class by class, each class in
  its doc file's order;
* ``miss_func``: the first doc of each held-out name is removed; it comes back
  at its turn (``functions_at``), whose user message list is empty in the data
  (bfcl-eval then sends a fixed user prompt; that is the runner's business);
* the language hint " Note that the provided function is in Python 3
  syntax." is appended to every description, except to the held-out docs,
  which bfcl-eval removes before it adds the hint and adds back unchanged;
* ``excluded_function`` (18 entries of each category) is never applied by
  bfcl-eval: the docs keep those functions. It is kept here as data only;
* ``initial_config`` may hold state for a class that is not involved
  (``multi_turn_*_96``); bfcl-eval ignores it, and so does ``Environment``.

Problems in a file are reported in one ``DatasetError`` naming the file,
the line (for BFCL files, the entry id) and the field.
"""

from __future__ import annotations

import ast
import copy
import os
import pickle
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promptgrid._astparse import parse
from promptgrid.errors import DatasetError, closest
from promptgrid.matrix.datasets._bfcl import _prefix, _read_jsonl, _source
from promptgrid.matrix.datasets._scenario import scenario_problems
from promptgrid.matrix.episodes._environment import (
    _ALSO_ACCEPTED,
    ENVIRONMENT_CLASSES,
    ToolCall,
    _argument_problem,
    _check_classes,
    _class_docs,
    _functions,
    _shape_problem,
    bind_positional,
    method_signatures,
)
from promptgrid.safeio import read_json_lines
from promptgrid.templates import BfclSource

__all__ = [
    "CONVERSATION_CATEGORIES",
    "MAX_CALL_CHARS",
    "MAX_PROBLEMS",
    "SPEC_FORMS",
    "Conversation",
    "conversation_to_record",
    "load_conversations",
    "parse_call",
]

CONVERSATION_CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param",
                           "multi_turn_long_context")
SPEC_FORMS = (*(f"bfcl:{category}" for category in CONVERSATION_CATEGORIES), "jsonl:PATH", "mini-mt")
MAX_PROBLEMS = 20
MAX_CALL_CHARS = 100_000
"""Longest call string parsed (BFCL's longest ground-truth call is under 1,000 characters)."""
MAX_TURNS = 256
"""Most user turns in one conversation (BFCL's longest has 7). A step's request grows with every turn, so a
conversation of thousands of turns would cost quadratic time and tokens; longer ones are refused at load."""
MAX_MESSAGE_CHARS = 1_000_000
"""Most characters of one user turn's messages."""
MAX_TURN_CALLS = 1_024
"""Most ground-truth calls in one turn (BFCL's most is 30)."""
ROLES = ("system", "user", "assistant")
JSONL_KEYS = ("id", "question", "involved_classes", "initial_config", "ground_truth", "missed_function",
              "function", "long_context", "category", "path", "excluded_function",
              *("language", "template", "no_solution_turns", "clarify_turns"))
"""The fields of a ``jsonl:`` line. The last four are annotations (``mini-mt`` writes them: the language, the
language-independent conversation id, the turns without a valid solution and those needing a question); they
are accepted and not read."""
_DOCS_HINT = "see docs/conversations.md for the line format"


@dataclass(frozen=True)
class Conversation:
    """One multi-turn case: user turns against the stateful API ``involved_classes``.

    ``turns[t]`` is the list of messages of user turn ``t`` (empty for the turn
    at which a ``miss_func`` entry gives the held-out function back).
    ``functions`` are the docs the model sees from the first turn;
    ``missed_functions`` maps a turn to the names that become available there
    and ``held_out_functions`` to their docs (``functions_at`` joins them).
    ``ground_truth[t]`` are the calls that do turn ``t`` (empty: the turn
    cannot be done with what is offered). ``long_context`` loads the
    environments with BFCL's long-context state. ``path`` and
    ``excluded_functions`` are BFCL's annotations (``Class.method`` the
    ground truth walks; functions meant to be excluded, never applied by
    bfcl-eval). ``source`` is the spec the conversation was loaded from.
    """

    id: str
    category: str
    turns: tuple[tuple[Mapping[str, Any], ...], ...]
    involved_classes: tuple[str, ...]
    initial_config: Mapping[str, Any]
    functions: tuple[Mapping[str, Any], ...]
    ground_truth: tuple[tuple[ToolCall, ...], ...]
    missed_functions: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    held_out_functions: Mapping[int, tuple[Mapping[str, Any], ...]] = field(default_factory=dict)
    long_context: bool = False
    path: tuple[str, ...] = ()
    excluded_functions: tuple[str, ...] = ()
    source: str = ""
    language: str = "en"
    """The language of the user turns (a record's ``language``; ``en`` when it names none): what a variant's
    ``instruction_language: query`` / ``description_language: query`` follow."""
    template: str = ""
    """The language-independent id shared by a conversation's translations (a record's ``template``; the id
    when it names none): reports pair languages by it."""

    def __repr__(self) -> str:
        """One line: id, category, classes and counts (the turns, docs and state are in the fields)."""
        calls = sum(len(turn) for turn in self.ground_truth)
        return (f"Conversation({self.id!r}, category={self.category!r}, classes={list(self.involved_classes)}, "
                f"turns={len(self.turns)}, functions={len(self.functions)}, expected_calls={calls})")

    def functions_at(self, turn: int) -> tuple[Mapping[str, Any], ...]:
        """The docs the model has at ``turn``: ``functions``, then the held-out docs of every turn up to it, in turn
        order (bfcl-eval extends its list at each such turn)."""
        docs = list(self.functions)
        for index in sorted(self.held_out_functions):
            if index <= turn:
                docs.extend(self.held_out_functions[index])
        return tuple(docs)


# --------------------------------------------------------------------------- call strings

def _literal(node: ast.expr, where: str) -> Any:
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise ValueError(f"{where} is not a literal value (only strings, numbers, booleans, None, lists, "
                         "tuples and dicts of them)") from None
    problem = _shape_problem({"value": value})
    if problem:
        raise ValueError(f"{where} holds {problem}")
    return value


def parse_call(text: str, functions: Iterable[Mapping[str, Any]], classes: Sequence[str] | None = None) -> ToolCall:
    """One call in Python syntax as a ``ToolCall``, parsed and never evaluated.

    ``text`` must be a single call of a plain name, ``name(arg, key=value,
    ...)``, whose name is one of ``functions`` (BFCL docs); each argument must
    be a literal (``ast.literal_eval``: strings, numbers, booleans, ``None``,
    lists, tuples, dicts). A positional argument is named by the method's
    signature, as Python binds it in bfcl-eval's ``eval`` (the method of
    ``classes``, the conversation's; without them, of whichever BFCL class has
    a method of that name). Raises ``ValueError`` with a one-line reason
    otherwise (attribute calls, nested calls, ``*args``, unknown names, more
    positional arguments than the method has parameters, an argument given
    twice).
    """
    node, name = _call_node(text)
    docs = {str(doc.get("name")): doc for doc in functions}
    if name not in docs:
        raise ValueError(f"{name!r} is not one of the conversation's functions.{closest(name, docs)}")
    positional = [_literal(_not_starred(argument, name), f"{name}: argument {index + 1}")
                  for index, argument in enumerate(node.args)]
    arguments = _keyword_arguments(node, name)
    if not positional:
        return ToolCall(name, arguments)
    return _bound_call(name, arguments, positional, classes)


def _call_node(text: Any) -> tuple[ast.Call, str]:
    """``text`` parsed as one call of a plain name, and that name; ``ValueError`` saying what it is instead."""
    if not isinstance(text, str):
        raise ValueError(f"a call must be a string, not {type(text).__name__}")
    if len(text) > MAX_CALL_CHARS:
        raise ValueError(f"the call is longer than {MAX_CALL_CHARS} characters")
    try:
        tree = parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not a Python call ({exc.msg})") from None
    except (ValueError, MemoryError, RecursionError):
        raise ValueError("not a Python call (nested too deeply or too large)") from None
    node = tree.body
    if not isinstance(node, ast.Call):
        raise ValueError("not a function call")
    if not isinstance(node.func, ast.Name):
        raise ValueError("only a plain function name can be called (no attribute, subscript or nested call)")
    return node, node.func.id


def _not_starred(argument: ast.expr, name: str) -> ast.expr:
    """``argument``, or ``ValueError`` when it is a ``*argument``."""
    if isinstance(argument, ast.Starred):
        raise ValueError(f"{name}: *arguments are not allowed")
    return argument


def _keyword_arguments(node: ast.Call, name: str) -> dict[str, Any]:
    """The keyword arguments of a call, by name, each a literal; ``ValueError`` for ``**arguments`` or a name
    given twice."""
    arguments: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            raise ValueError(f"{name}: **arguments are not allowed")
        if keyword.arg in arguments:
            raise ValueError(f"{name}: argument {keyword.arg!r} is given twice")
        arguments[keyword.arg] = _literal(keyword.value, f"{name}: argument {keyword.arg!r}")
    return arguments


def _bound_call(name: str, arguments: dict[str, Any], positional: list[Any], classes: Sequence[str] | None
                ) -> ToolCall:
    """The call with its positional arguments named by the method's signature (``bind_positional``)."""
    signatures = method_signatures(list(classes) if classes else list(ENVIRONMENT_CLASSES))
    if name not in signatures:
        raise ValueError(f"{name} is not a method of {', '.join(classes or ENVIRONMENT_CLASSES)}, so its "
                         "positional arguments cannot be named; name them (key=value)")
    bound = bind_positional(ToolCall(name, arguments, tuple(positional)), signatures[name])
    if isinstance(bound, str):
        raise ValueError(bound)
    return bound


def _call(item: Any, functions: Sequence[Mapping[str, Any]], classes: Sequence[str]) -> ToolCall:
    """A ground-truth call: BFCL's string form, or the JSON form ``{"name": ..., "arguments": {...}}``."""
    if isinstance(item, str):
        return parse_call(item, functions, classes)
    if isinstance(item, dict) and set(item) <= {"name", "arguments"} and isinstance(item.get("name"), str):
        arguments = item.get("arguments", {})
        if not isinstance(arguments, dict):
            raise ValueError("'arguments' must be an object of parameter names and values")
        names = {doc.get("name") for doc in functions}
        if item["name"] not in names:
            raise ValueError(f"{item['name']!r} is not one of the conversation's functions."
                             f"{closest(item['name'], [str(n) for n in names])}")
        return ToolCall(item["name"], copy.deepcopy(arguments))
    raise ValueError('a call must be a string such as "cd(folder=\'doc\')" or an object {"name": ..., '
                     '"arguments": {...}}')


# --------------------------------------------------------------------------- records

class _Problem(Exception):
    """One problem of one record: the field and what is wrong."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message)
        self.field = field_name
        self.message = message


def _turns(question: Any) -> tuple[tuple[Mapping[str, Any], ...], ...]:
    if not isinstance(question, list) or not question:
        raise _Problem("question", 'must be a non-empty list of turns, each a list of messages, e.g. '
                                   '[[{"role": "user", "content": "..."}]]')
    if len(question) > MAX_TURNS:
        raise _Problem("question", f"has {len(question)} turns; at most {MAX_TURNS} are run (split the "
                                   "conversation)")
    turns = []
    for number, turn in enumerate(question):
        if not isinstance(turn, list):
            raise _Problem(f"question[{number}]", "must be a list of messages (empty for a held-out function's "
                                                  "turn)")
        messages = []
        for position, message in enumerate(turn):
            where = f"question[{number}][{position}]"
            if not isinstance(message, dict) or message.get("role") not in ROLES or \
                    not isinstance(message.get("content"), str):
                raise _Problem(where, f"must be a message {{\"role\": one of {', '.join(ROLES)}, \"content\": "
                                      "text}")
            messages.append(dict(message))
        if sum(len(m["content"]) for m in messages) > MAX_MESSAGE_CHARS:
            raise _Problem(f"question[{number}]", f"holds more than {MAX_MESSAGE_CHARS} characters of messages")
        turns.append(tuple(messages))
    return tuple(turns)


def _names(value: Any, field_name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _Problem(field_name, "must be a list of strings")
    return tuple(value)


def _missed(value: Any, turns: int) -> dict[int, tuple[str, ...]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _Problem("missed_function", 'must be an object {"turn index": ["function name", ...]}')
    missed: dict[int, tuple[str, ...]] = {}
    for key, names in value.items():
        try:
            turn = int(key)
        except ValueError:
            turn = -1
        if not 0 <= turn < turns or str(turn) != str(key).strip():
            raise _Problem("missed_function", f"key {key!r} is not a turn index (0 to {turns - 1})")
        missed[turn] = _names(names, f"missed_function[{key!r}]")
    return missed


def _conversation(record: Mapping[str, Any], *, category: str, source: str, long_context: bool | None,
                  bfcl: BfclSource, given_docs: bool) -> Conversation:
    """A ``Conversation`` from one record (a BFCL entry with its ground truth merged in, or a JSONL line)."""
    entry_id = record.get("id")
    if not isinstance(entry_id, str) or not entry_id.strip():
        raise _Problem("id", "must be a non-empty string")
    turns = _turns(record.get("question"))
    classes = _classes(record.get("involved_classes"))
    initial_config = _initial_config(record.get("initial_config", {}), classes)
    missed = _missed(record.get("missed_function"), len(turns))
    held_out_names = [name for turn in sorted(missed) for name in missed[turn]]
    all_docs = [doc for name in classes for doc in _class_docs(bfcl, name)]  # read here, copied where kept
    if given_docs and record.get("function") is not None:
        all_docs, functions = _given_functions(record["function"], all_docs, classes, held_out_names)
    else:
        try:
            functions = _functions(bfcl, classes, held_out_names, python_hint=True)
        except DatasetError as exc:
            raise _Problem("missed_function", str(exc)) from None
    held_out: dict[int, tuple[Mapping[str, Any], ...]] = {}
    for turn in sorted(missed):
        held_out[turn] = tuple(copy.deepcopy(next(doc for doc in all_docs if doc["name"] == name))
                               for name in missed[turn])
    ground_truth = _ground_truth(record.get("ground_truth"), len(turns), classes, all_docs, bfcl)
    flag = record.get("long_context", False) if long_context is None else long_context
    if not isinstance(flag, bool):
        raise _Problem("long_context", "must be true or false")
    return Conversation(
        id=entry_id,
        category=category,
        turns=turns,
        involved_classes=classes,
        initial_config=_fresh(initial_config),
        functions=tuple(functions),
        ground_truth=ground_truth,
        missed_functions=missed,
        held_out_functions=held_out,
        long_context=flag,
        path=_names(record.get("path"), "path"),
        excluded_functions=_names(record.get("excluded_function"), "excluded_function"),
        source=source,
        language=_text_field(record, "language", "en"),
        template=_text_field(record, "template", entry_id),
    )


def _classes(value: Any) -> tuple[str, ...]:
    """A record's ``involved_classes``: a non-empty list of known environment classes."""
    if not isinstance(value, list) or not value:
        raise _Problem("involved_classes", "must be a non-empty list of class names such as \"GorillaFileSystem\"")
    try:
        return tuple(_check_classes(value))
    except DatasetError as exc:
        raise _Problem("involved_classes", str(exc)) from None


def _initial_config(value: Any, classes: tuple[str, ...]) -> dict[str, Any]:
    """A record's ``initial_config``: class name -> initial state, which ``scenario_problems`` finds sound."""
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise _Problem("initial_config", "must be an object: class name -> that class's initial state (an object)")
    for where, what in scenario_problems(classes, value):
        raise _Problem(where, what)
    return value


def _given_functions(docs: Any, all_docs: list[Any], classes: tuple[str, ...], held_out_names: list[str]
                     ) -> tuple[list[Any], list[Any]]:
    """A record's own ``function`` docs (each a function of its classes): every doc, and those of the first turn
    (the held-out ones removed), both copies."""
    known = {doc["name"] for doc in all_docs}
    if not isinstance(docs, list) or not all(isinstance(d, dict) and isinstance(d.get("name"), str) and
                                             isinstance(d.get("parameters"), dict) for d in docs):
        raise _Problem("function", "must be a list of function docs, each with a name and parameters")
    strangers = [d["name"] for d in docs if d["name"] not in known]
    if strangers:
        raise _Problem("function", f"{strangers[0]!r} is not a function of {', '.join(classes)}, so the "
                                   f"environment cannot run it.{closest(strangers[0], known)}")
    every = copy.deepcopy(docs)
    functions = copy.deepcopy(docs)
    for name in held_out_names:
        index = next((i for i, doc in enumerate(functions) if doc["name"] == name), None)
        if index is None:
            raise _Problem("missed_function", f"{name!r} is not among the functions")
        functions.pop(index)
    return every, functions


def _ground_truth(truth: Any, turns: int, classes: tuple[str, ...], all_docs: list[Any], bfcl: BfclSource
                  ) -> tuple[tuple[ToolCall, ...], ...]:
    """A record's ``ground_truth``: per turn, its calls, each a call of the docs with arguments they accept."""
    if not isinstance(truth, list) or len(truth) != turns or not all(isinstance(t, list) for t in truth):
        raise _Problem("ground_truth", f"must be a list of {turns} lists of calls, one per turn of the "
                                       "question (an empty list for a turn that cannot be done)")
    owners = {doc["name"]: name for name in classes for doc in _class_docs(bfcl, name)}
    parameters = {str(doc["name"]): doc.get("parameters") or {} for doc in all_docs}
    ground_truth = []
    for number, turn_calls in enumerate(truth):
        if len(turn_calls) > MAX_TURN_CALLS:
            raise _Problem(f"ground_truth[{number}]", f"has {len(turn_calls)} calls; at most {MAX_TURN_CALLS}")
        ground_truth.append(tuple(_truth_call(item, number, position, classes, all_docs, owners, parameters)
                                  for position, item in enumerate(turn_calls)))
    return tuple(ground_truth)


def _truth_call(item: Any, number: int, position: int, classes: tuple[str, ...], all_docs: list[Any],
                owners: Mapping[str, str], parameters: Mapping[str, Any]) -> ToolCall:
    """Call ``position`` of turn ``number`` of a ground truth (``_call``), whose arguments its doc's parameters
    accept (``_argument_problem``)."""
    try:
        call = _call(item, all_docs, classes)
    except ValueError as exc:
        raise _Problem(f"ground_truth[{number}][{position}]", str(exc)) from None
    also = {param: kind for (owner, param), kind in _ALSO_ACCEPTED.items() if owner == owners.get(call.name)}
    problem = _argument_problem(call.name, dict(call.arguments), parameters.get(call.name, {}), also)
    if problem:
        raise _Problem(f"ground_truth[{number}][{position}]", f"{problem} (the function doc's parameters)")
    return call


def _fresh(data: Any) -> Any:
    """A copy of JSON data (what a record owns): a pickle round trip, several times faster than ``deepcopy``."""
    return pickle.loads(pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL))


def _text_field(record: Mapping[str, Any], name: str, default: str) -> str:
    value = record.get(name, default)
    if not isinstance(value, str) or not value.strip():
        raise _Problem(name, "must be a non-empty string")
    if name == "language":
        from promptgrid.languages import language_problem

        problem = language_problem(value)
        if problem:
            raise _Problem(name, problem)
    return value


def conversation_to_record(conversation: Conversation) -> dict[str, Any]:
    """A conversation as one ``jsonl:`` line's object (``load_conversations`` reads it back equal).

    The ground truth is written in the JSON call form and ``function`` holds
    every doc (the first turn's, then the held-out ones); drop ``function``
    from a line to have BFCL's docs of its classes instead.
    """
    return {
        "id": conversation.id,
        "category": conversation.category,
        "question": [[dict(message) for message in turn] for turn in conversation.turns],
        "involved_classes": list(conversation.involved_classes),
        "initial_config": copy.deepcopy(dict(conversation.initial_config)),
        "ground_truth": [[{"name": call.name, "arguments": copy.deepcopy(dict(call.arguments))} for call in turn]
                         for turn in conversation.ground_truth],
        "missed_function": {str(turn): list(names) for turn, names in conversation.missed_functions.items()},
        "function": [copy.deepcopy(dict(doc)) for doc in conversation.functions_at(len(conversation.turns))],
        "long_context": conversation.long_context,
        "path": list(conversation.path),
        "excluded_function": list(conversation.excluded_functions),
        "language": conversation.language,
        "template": conversation.template or conversation.id,
    }


# --------------------------------------------------------------------------- loaders

def _load_bfcl(category: str, limit: int | None, bfcl_data: str | os.PathLike[str] | None) -> list[Conversation]:
    source = _source(bfcl_data)
    prefix, present = _prefix(source)
    if category not in present:
        raise DatasetError(f"{source.describe()} has no {prefix}_{category}.json (bfcl-eval before V3?).")
    entries = _read_jsonl(source, f"data/{prefix}_{category}.json")
    if limit is not None:
        entries = entries[:limit]
    answers = {answer.get("id"): answer.get("ground_truth")
               for answer in _read_jsonl(source, f"data/possible_answer/{prefix}_{category}.json")}
    where = source.where(f"data/{prefix}_{category}.json")
    out = []
    problems: list[str] = []
    for number, entry in enumerate(entries, start=1):
        record = dict(entry)
        record["ground_truth"] = answers.get(entry.get("id"))
        try:
            out.append(_conversation(record, category=category, source=f"bfcl:{category}",
                                     long_context=category == "multi_turn_long_context", bfcl=source,
                                     given_docs=False))
        except _Problem as problem:
            label = f"entry {entry.get('id')!r}" if isinstance(entry.get("id"), str) else f"entry {number}"
            problems.append(f"{where}: {label}: {problem.field}: {problem.message}")
            if len(problems) >= MAX_PROBLEMS:
                break
    _raise(problems, where, "point --bfcl-data at an unmodified bfcl-eval")
    return out


def _load_mini_mt(languages: str | None, limit: int | None, bfcl_data: str | os.PathLike[str] | None
                  ) -> list[Conversation]:
    """The ``mini-mt`` conversations: all languages, or those of ``languages`` (``"de,ja"``), in file order
    (template by template), at most ``limit``: with several languages, ``limit`` distinct templates while there
    are enough, the language taking turns, as ``--limit`` picks ``mini``'s questions (``_limited``). The set and
    its file are ``_mini_mt``'s (imported here, one way)."""
    from promptgrid.matrix.datasets._mini_mt import MINI_MT_LANGUAGES, data_file, parse_languages

    wanted = MINI_MT_LANGUAGES if languages is None else parse_languages(languages)
    path = data_file()  # DatasetError when missing (a broken install), naming scripts/build_mini_mt.py
    conversations = [c for c in _load_jsonl(str(path), None, bfcl_data) if c.language in wanted]
    return _limited(conversations, limit)


def _limited(conversations: list[Conversation], limit: int | None) -> list[Conversation]:
    """At most ``limit`` conversations, in their order: the first ``limit`` when they are in one language; in
    several, ``limit`` distinct templates while there are enough, each in one language, the language taking
    turns from template to template (``Dataset.select``'s rule for ``mini``: ``datasets._model.spread``), so a
    short run never takes one conversation in several languages before every template is in."""
    if limit is None:
        return conversations
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise DatasetError(f"limit={limit!r} must be a whole number of conversations (0 or more), or None.")
    if len({c.language for c in conversations}) <= 1:
        return conversations[:limit]
    from promptgrid.matrix.datasets._model import spread

    return spread(conversations, limit, language=lambda c: c.language, group=lambda c: c.template or c.id)


def _load_jsonl(path: str, limit: int | None, bfcl_data: str | os.PathLike[str] | None) -> list[Conversation]:
    source = _source(bfcl_data)
    out: list[Conversation] = []
    problems: list[str] = []
    try:
        with open(path, "rb") as handle:
            _read_jsonl_conversations(handle, path, limit, source, out, problems)
    except FileNotFoundError:
        raise DatasetError(f"jsonl dataset {path} does not exist.") from None
    except IsADirectoryError:
        raise DatasetError(f"jsonl dataset {path} is a directory; give a .jsonl file.") from None
    except OSError as exc:
        raise DatasetError(f"cannot read jsonl dataset {path}: {exc.strerror or exc}.") from None
    _raise(problems, path, _DOCS_HINT)
    return out


def _read_jsonl_conversations(handle: Iterable[bytes], path: str, limit: int | None, source: BfclSource,
                              out: list[Conversation], problems: list[str]) -> None:
    """Read the lines of a ``jsonl:`` file into ``out`` (at most ``limit``) and their problems into ``problems``
    (reading stops at ``MAX_PROBLEMS``)."""
    seen: dict[str, int] = {}
    for line in read_json_lines(handle, name=path):
        if limit is not None and len(out) >= limit:
            break
        where = f"{path}:{line.number}"
        if line.error is not None:
            problems.append(f"{where}: {line.error}")
        elif not isinstance(line.value, dict):
            problems.append(f"{where}: not a JSON object")
        else:
            try:
                conversation = _jsonl_conversation(line.value, path, source)
                if conversation.id in seen:
                    raise _Problem("id", f"{conversation.id!r} is also the id on line {seen[conversation.id]}")
                seen[conversation.id] = line.number
                out.append(conversation)
            except _Problem as problem:
                problems.append(f"{where}: {problem.field}: {problem.message}")
        if len(problems) >= MAX_PROBLEMS:
            break


def _jsonl_conversation(value: dict[str, Any], path: str, source: BfclSource) -> Conversation:
    """The conversation of one ``jsonl:`` line's object: known fields only, a category (``multi_turn`` when it
    names none), its own docs when it has ``function``."""
    unknown = [key for key in value if key not in JSONL_KEYS]
    if unknown:
        raise _Problem(unknown[0], f"is not a field of a conversation.{closest(unknown[0], JSONL_KEYS)}")
    category = value.get("category", "multi_turn")
    if not isinstance(category, str) or not category.strip():
        raise _Problem("category", "must be a non-empty string")
    return _conversation(value, category=category, source=f"jsonl:{path}", long_context=None, bfcl=source,
                         given_docs=True)


def _raise(problems: list[str], where: str, hint: str) -> None:
    if not problems:
        return
    more = f" (stopped after {MAX_PROBLEMS})" if len(problems) >= MAX_PROBLEMS else ""
    noun = "problem" if len(problems) == 1 else "problems"
    raise DatasetError("\n".join([f"{where} has {len(problems)} {noun}{more}; {hint}:",
                                  *(f"  {problem}" for problem in problems)]))


_CATEGORY_NOTES = {
    "multi_turn_base": "user turns against stateful API classes (file system, messaging, trading, travel, ...), "
                       "scored by the state and results the calls leave",
    "multi_turn_miss_func": "as multi_turn_base, a function held out until a later turn",
    "multi_turn_miss_param": "as multi_turn_base, a turn lacking a parameter the model must ask for",
    "multi_turn_long_context": "as multi_turn_base, the environments loaded with long-context state",
}


def list_conversation_datasets(bfcl_data: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """Conversation dataset spec -> one-line description, for ``promptgrid datasets`` (beside
    ``datasets.list_datasets``' single-turn ones).

    The four BFCL multi-turn categories are listed when bfcl-eval's data has them; otherwise one
    ``bfcl:multi_turn_<...>`` line says why not and how to make them available.
    """
    from promptgrid.matrix.datasets._bfcl import _prefix
    from promptgrid.matrix.datasets._mini_mt import MINI_MT_LANGUAGES, template_ids

    out: dict[str, str] = {}
    try:
        present = _prefix(_source(bfcl_data))[1]
    except DatasetError as exc:
        present, reason = set(), str(exc)
    else:
        reason = "no multi-turn categories found in bfcl-eval's data (bfcl-eval before V3?)"
    categories = [category for category in CONVERSATION_CATEGORIES if category in present]
    for category in categories:
        out[f"bfcl:{category}"] = f"BFCL {category}: {_CATEGORY_NOTES[category]} (bfcl-eval's data files)"
    if not categories:
        out["bfcl:multi_turn_<...>"] = f"BFCL's multi-turn categories: not available here. {reason}"
    templates = len(template_ids())
    out["mini-mt"] = (f"built-in: {templates} conversations of 2 to 5 user turns on TravelAPI, MessageAPI "
                      f"and TicketAPI, each in {', '.join(MINI_MT_LANGUAGES)} with localized state "
                      f"({templates * len(MINI_MT_LANGUAGES)} in all)")
    out["mini-mt:LANG[,LANG...]"] = "mini-mt restricted to some languages, e.g. mini-mt:de,ja"
    out["jsonl:PATH"] = ("your own conversations, one JSON object per line, the first with involved_classes "
                         "(docs/conversations.md)")
    return out


def dataset_files(spec: str) -> list[Path]:
    """The files a spec reads, as ``load_conversations`` finds them (``jsonl:`` path stripped and ``~``-expanded,
    ``mini-mt``'s data file): the inputs an output must not overwrite. BFCL's files (inside bfcl-eval) are not
    listed."""
    kind, sep, argument = spec.strip().partition(":") if isinstance(spec, str) else ("", "", "")
    if kind == "jsonl" and argument.strip():
        return [Path(argument.strip()).expanduser()]
    if kind.strip() == "mini-mt":
        from promptgrid.matrix.datasets._mini_mt import DATA_FILE

        return [DATA_FILE]
    return []


def select_conversations(spec: str, *, cases: Iterable[str] | None = None, limit: int | None = None,
                         bfcl_data: str | os.PathLike[str] | None = None) -> list[Conversation]:
    """The conversations of ``spec`` whose ids are in ``cases`` (all when None or empty), in file order, at most
    ``limit`` (picked as ``_limited`` does when they are in several languages): what ``run``, ``--dry-run`` and
    ``render`` take from a conversation dataset. An id the dataset does not have raises ``DatasetError`` naming it
    (with the closest id), so a typo never selects nothing."""
    if not cases:
        return load_conversations(spec, limit=limit, bfcl_data=bfcl_data)  # the loader stops at the limit
    from promptgrid.matrix.datasets._model import _unknown

    conversations = load_conversations(spec, bfcl_data=bfcl_data)
    wanted = list(dict.fromkeys(cases))
    _unknown("case", wanted, (c.id for c in conversations), spec)
    picked = [c for c in conversations if c.id in set(wanted)]
    return _limited(picked, limit)


def load_conversations(spec: str, *, limit: int | None = None,
                       bfcl_data: str | os.PathLike[str] | None = None) -> list[Conversation]:
    """The conversations a spec names (forms in the module docstring), in file order, at most ``limit``.

    BFCL's files and function docs are read from ``bfcl_data`` (a wheel, a
    folder or a gorilla checkout), else ``$PROMPTGRID_BFCL_DATA``, else the
    installed bfcl-eval. Raises ``DatasetError`` for an unknown spec (with a
    suggestion) and for malformed records (file, line or entry, field).
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise DatasetError(f"limit={limit!r} must be a whole number of conversations (0 or more), or None.")
    if not isinstance(spec, str) or not spec.strip():
        raise DatasetError(f"no conversation dataset given. Valid forms: {', '.join(SPEC_FORMS)}.")
    kind, _sep, argument = spec.strip().partition(":")
    if kind == "bfcl" and argument.strip() in CONVERSATION_CATEGORIES:
        return _load_bfcl(argument.strip(), limit, bfcl_data)
    if kind == "jsonl" and argument.strip():
        return _load_jsonl(str(dataset_files(spec)[0]), limit, bfcl_data)
    if kind.strip() == "mini-mt":  # the built-in multilingual set (``_mini_mt``); "mini-mt:de,ja" picks languages
        return _load_mini_mt(argument if _sep else None, limit, bfcl_data)
    if kind == "bfcl":
        hint = closest(argument.strip(), CONVERSATION_CATEGORIES)
        raise DatasetError(f"{spec!r} is not a multi-turn BFCL category.{hint} Valid forms: {', '.join(SPEC_FORMS)}.")
    if kind == "jsonl":
        raise DatasetError(f"jsonl: needs a path, e.g. jsonl:conversations.jsonl ({_DOCS_HINT}).")
    hint = f" Did you mean 'jsonl:{spec}'?" if spec.strip().endswith(".jsonl") else \
        closest(kind, ("bfcl", "jsonl", "mini-mt"))
    raise DatasetError(f"unknown conversation dataset {spec!r}.{hint} Valid forms: {', '.join(SPEC_FORMS)}.")
