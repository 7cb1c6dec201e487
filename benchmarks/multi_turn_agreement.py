"""Agreement: promptgrid's multi-turn checker against bfcl-eval's ``multi_turn_checker``, entry verdict by verdict.

    .venv/bin/python benchmarks/multi_turn_agreement.py [--category multi_turn_base] [--limit N] [--seed S]

    .venv/bin/python benchmarks/multi_turn_agreement.py --strict-arguments   # promptgrid's opt-in strict rule

For every entry of the category (200 in ``multi_turn_base``) it builds up to
eight trajectories, each turn's calls one per step, as a model calling one
function at a time would make them (a turn with more calls than bfcl-eval's
step limit of 20, as two long-context entries have, gets several calls per
step, so that no trajectory is one bfcl-eval's inference would have
force-quit). Four are ``ToolCall`` objects, as a decoder gives them:

- ``ground_truth``: the entry's ground truth itself;
- ``drop_call``: one ground-truth call left out (a random call of a random
  turn that has calls);
- ``wrong_argument``: one argument of one call changed, its type kept
  (a string gets ``_x`` appended, a number grows by one, a boolean flips, a
  list loses its last element or gains one, a dictionary has one value
  changed so);
- ``extra_call``: a call appended to a turn that changes the environment's
  state where it stands. Candidates: the entry's own ground-truth calls and
  their one-argument variants (as ``wrong_argument`` makes them), in a
  seeded random order, then a few generic writes of the entry's classes
  (``touch``, ``post_tweet``, ``create_ticket``, ...) for entries that only
  read; each is tried on a fresh environment that has run the ground truth
  up to that turn, and the first that runs and changes a public attribute is
  kept.

Four are written as models write them, each step a Python answer text that
promptgrid decodes with score-file's decoder (``decode_step``) and bfcl-eval
gets as its decoded call strings:

- ``truth_text``: BFCL's own ground-truth strings, positional arguments
  included (``sort('final_report.pdf')``);
- ``repeated_call``: the ground truth with one call made twice in a row;
- ``numbers_as_strings``: every number of the ground truth's arguments
  written as a string (``budget_limit='2857.14'``); only for entries that
  pass a number;
- ``positional_argument``: one call's first argument given by position where
  the ground truth names it.

Each trajectory is scored twice:

- promptgrid: ``check_conversation`` on the decoded calls, run in
  promptgrid's bounded ``Environment``, under the default argument rule
  (``"bfcl"``: the method decides) or, with ``--strict-arguments``, the
  strict one;
- bfcl-eval: what its ``_evaluate_single_multi_turn_entry`` does after
  decoding (turn count check, empty steps dropped, then
  ``multi_turn_checker``), given the trajectory as bfcl-eval's decoded call
  strings (``name(key=repr(value), ...)``) and the ground truth as the
  dataset's own strings. bfcl-eval ``eval``s those strings: acceptable here,
  where they are this benchmark's own, generated from the ground truth,
  never model output. Its executor keeps its instances in a module-global
  table under a name made of the model name and entry id; every reference
  call gets a name of its own, and its instances are removed afterwards.

It prints the agreement per mutation kind (entry verdict, and bfcl-eval's
error type among the entries both call invalid), every disagreement (entry,
mutation, both verdicts, what differs), and the time each checker takes per
trajectory: promptgrid's with the ground truth run for that trajectory alone
(two environment workers started, like for like with bfcl-eval, which runs
the ground truth again for every trajectory) and with one ground-truth run
shared by the entry's four trajectories (``run_ground_truth``, as a run with
repeats uses it); bfcl-eval's runs everything in its own process.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import inspect
import itertools
import json
import math
import os
import random
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from promptgrid.matrix.datasets._conversations import Conversation, load_conversations  # noqa: E402
from promptgrid.matrix.episodes._environment import Environment, ToolCall, method_signatures  # noqa: E402
from promptgrid.matrix.scoring._score_conversations import decode_step  # noqa: E402
from promptgrid.matrix.scoring.state_check import (  # noqa: E402
    MAXIMUM_STEP_LIMIT,
    check_conversation,
    run_ground_truth,
)
from promptgrid.matrix.scoring.verdict import Verdict  # noqa: E402

MUTATIONS = ("ground_truth", "drop_call", "wrong_argument", "extra_call")
"""Trajectories of ``ToolCall`` objects (what a decoder gives), one per entry each."""
WRITTEN = ("truth_text", "repeated_call", "numbers_as_strings", "positional_argument")
"""Trajectories written as models write them; ``numbers_as_strings`` only for entries whose ground truth passes a
number (the others would be the ground truth again)."""
KINDS = MUTATIONS + WRITTEN
# How many of the extra-call candidates made from the entry's own calls are tried before the fallbacks.
_EXTRA_CANDIDATES = 40
# Fallback extra calls, per class, for entries whose own calls (and their variants) change nothing where they
# are appended (entries that only read: ``tail``, ``diff``, ...).
_FALLBACK_CALLS = {
    "GorillaFileSystem": (ToolCall("touch", {"file_name": "promptgrid_extra.txt"}),
                          ToolCall("mkdir", {"dir_name": "promptgrid_extra"})),
    "TwitterAPI": (ToolCall("post_tweet", {"content": "promptgrid extra"}),
                   ToolCall("follow_user", {"username_to_follow": "promptgrid"})),
    "MessageAPI": (ToolCall("add_contact", {"user_name": "promptgrid"}),),
    "TicketAPI": (ToolCall("create_ticket", {"title": "promptgrid extra"}),),
    "TradingBot": (ToolCall("fund_account", {"amount": 1.0}), ToolCall("add_to_watchlist", {"stock": "NVDA"})),
    "TravelAPI": (ToolCall("authenticate_travel", {"client_id": "promptgrid", "client_secret": "promptgrid",
                                                   "refresh_token": "promptgrid", "grant_type": "read",
                                                   "user_first_name": "Prompt", "user_last_name": "Grid"}),),
    "VehicleControlAPI": (ToolCall("setHeadlights", {"mode": "on"}),
                          ToolCall("set_navigation", {"destination": "promptgrid"})),
}


@dataclass(frozen=True)
class Text:
    """A step written as a model writes it: Python call strings, given to promptgrid as the answer text
    ``[call, ...]`` (decoded by score-file's decoder, ``decode_step``) and to bfcl-eval as its decoded strings."""

    calls: tuple[str, ...]

    @property
    def answer(self) -> str:
        return f"[{', '.join(self.calls)}]"


Step = tuple[ToolCall, ...] | Text


@dataclass(frozen=True)
class Trajectory:
    """One scripted trajectory: per turn, per step, the calls (or their text); ``note`` says what was changed."""

    entry_id: str
    kind: str
    turns: tuple[tuple[Step, ...], ...]
    note: str = ""

    def model_turns(self) -> list[list[Any]]:
        """The turns as ``check_conversation`` takes them: a text step decoded as score-file decodes it."""
        return [[decode_step(step.answer) if isinstance(step, Text) else step for step in turn]
                for turn in self.turns]


# --------------------------------------------------------------------------- trajectories


def _steps(turn: Sequence[ToolCall]) -> tuple[tuple[ToolCall, ...], ...]:
    """One call per step; a turn with more calls than the step limit allows has several per step, in order."""
    size = max(1, math.ceil(len(turn) / MAXIMUM_STEP_LIMIT))
    return tuple(tuple(turn[start:start + size]) for start in range(0, len(turn), size))


def _with_turn(conversation: Conversation, index: int, calls: Sequence[ToolCall]) -> list[tuple[ToolCall, ...]]:
    turns = [tuple(turn) for turn in conversation.ground_truth]
    turns[index] = tuple(calls)
    return turns


def _trajectory(conversation: Conversation, kind: str, turns: Sequence[Sequence[ToolCall]], note: str) -> Trajectory:
    return Trajectory(conversation.id, kind, tuple(_steps(turn) for turn in turns), note)


def _mutated_value(value: Any, rng: random.Random) -> Any:
    """A different value of the same type."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "_x"
    if isinstance(value, list):
        return value[:-1] if value else ["x"]
    if isinstance(value, dict) and value:
        key = rng.choice(sorted(value))
        return {**value, key: _mutated_value(value[key], rng)}
    raise ValueError(f"no mutation for {value!r}")


def _mutable(value: Any) -> bool:
    return isinstance(value, (bool, int, float, str, list)) or (isinstance(value, dict) and bool(value))


def drop_call(conversation: Conversation, rng: random.Random) -> Trajectory:
    turn_index = rng.choice([t for t, turn in enumerate(conversation.ground_truth) if turn])
    calls = list(conversation.ground_truth[turn_index])
    dropped = calls.pop(rng.randrange(len(calls)))
    return _trajectory(conversation, "drop_call", _with_turn(conversation, turn_index, calls),
                       f"turn {turn_index}: dropped {bfcl_call_string(dropped)}")


def wrong_argument(conversation: Conversation, rng: random.Random) -> Trajectory:
    places = [(t, c, key) for t, turn in enumerate(conversation.ground_truth) for c, call in enumerate(turn)
              for key, value in sorted(call.arguments.items()) if _mutable(value)]
    turn_index, call_index, key = rng.choice(places)
    calls = list(conversation.ground_truth[turn_index])
    call = calls[call_index]
    changed = ToolCall(call.name, {**call.arguments, key: _mutated_value(call.arguments[key], rng)})
    calls[call_index] = changed
    return _trajectory(conversation, "wrong_argument", _with_turn(conversation, turn_index, calls),
                       f"turn {turn_index}: {bfcl_call_string(call)} -> {bfcl_call_string(changed)}")


def extra_call(conversation: Conversation, rng: random.Random, make_env: Callable[..., Any]) -> Trajectory:
    """The ground truth plus one call, appended to a turn, that changes a public attribute where it runs."""
    turns_with_calls = [t for t, turn in enumerate(conversation.ground_truth) if turn]
    truth_calls = [call for turn in conversation.ground_truth for call in turn]
    variants = [ToolCall(call.name, {**call.arguments, key: _mutated_value(value, rng)})
                for call in truth_calls for key, value in sorted(call.arguments.items()) if _mutable(value)]
    pool = sorted({bfcl_call_string(call): call for call in [*truth_calls, *variants]}.items())
    candidates = [(t, call) for t in turns_with_calls for _, call in pool]
    rng.shuffle(candidates)
    fallbacks = [(t, call) for t in turns_with_calls for name in conversation.involved_classes
                 for call in _FALLBACK_CALLS.get(name, ())]
    rng.shuffle(fallbacks)
    candidates = candidates[:_EXTRA_CANDIDATES] + fallbacks
    for turn_index, call in candidates:
        if _changes_state(conversation, turn_index, call, make_env):
            calls = [*conversation.ground_truth[turn_index], call]
            return _trajectory(conversation, "extra_call", _with_turn(conversation, turn_index, calls),
                               f"turn {turn_index}: appended {bfcl_call_string(call)}")
    raise LookupError(f"{conversation.id}: none of {len(candidates)} candidate calls changes the state")


def _changes_state(conversation: Conversation, turn_index: int, call: ToolCall, make_env: Callable[..., Any]) -> bool:
    env = make_env(list(conversation.involved_classes), conversation.initial_config,
                   long_context=conversation.long_context)
    try:
        for turn in conversation.ground_truth[: turn_index + 1]:
            if turn:
                env.run(list(turn))
        before = env.state()
        outcome = env.run([call])[0]
        return bool(outcome.ok) and env.state() != before
    finally:
        env.close()


def build_trajectories(conversation: Conversation, *, seed: int = 0,
                       make_env: Callable[..., Any] = Environment) -> list[Trajectory]:
    """The four trajectories of one entry (``KINDS``), each mutation drawn from its own seeded generator."""

    def rng(kind: str) -> random.Random:
        return random.Random(f"{seed}:{conversation.id}:{kind}")

    truth = _trajectory(conversation, "ground_truth", conversation.ground_truth, "")
    return [truth, drop_call(conversation, rng("drop_call")), wrong_argument(conversation, rng("wrong_argument")),
            extra_call(conversation, rng("extra_call"), make_env)]


def build_written(conversation: Conversation, raw_truth: Sequence[Sequence[str]], *, seed: int = 0) -> list[Trajectory]:
    """The trajectories written as models write them (``WRITTEN``): BFCL's own ground-truth strings (positional
    arguments included) as the answer text, one call repeated, every number as a string, and one call with its
    first argument given by position where the ground truth names it."""

    def rng(kind: str) -> random.Random:
        return random.Random(f"{seed}:{conversation.id}:{kind}")

    text = Trajectory(conversation.id, "truth_text", _text_turns(raw_truth),
                      "BFCL's ground-truth strings as the answer")
    places = [(t, c) for t, turn in enumerate(conversation.ground_truth) for c in range(len(turn))]
    turn_index, call_index = rng("repeated_call").choice(places)
    calls = list(conversation.ground_truth[turn_index])
    calls.insert(call_index + 1, calls[call_index])
    repeated = _trajectory(conversation, "repeated_call", _with_turn(conversation, turn_index, calls),
                           f"turn {turn_index}: {bfcl_call_string(calls[call_index])} twice")
    written = [text, repeated]
    numbers = [tuple(_numbers_as_strings(call) for call in turn) for turn in conversation.ground_truth]
    if numbers != [tuple(turn) for turn in conversation.ground_truth]:
        written.append(_trajectory(conversation, "numbers_as_strings", numbers, "every number as a string"))
    signatures = method_signatures(conversation.involved_classes)
    named = [(t, c) for t, turn in enumerate(conversation.ground_truth) for c, call in enumerate(turn)
             if (signatures.get(call.name) or ())[:1] and signatures[call.name][0] in call.arguments]  # type: ignore[index]
    if named:
        turn_index, call_index = rng("positional_argument").choice(named)
        call = conversation.ground_truth[turn_index][call_index]
        first = signatures[call.name][0]  # type: ignore[index]
        rest = {key: value for key, value in call.arguments.items() if key != first}
        moved = ToolCall(call.name, rest, (call.arguments[first],))
        strings = [[bfcl_call_string(c) for c in turn] for turn in conversation.ground_truth]
        strings[turn_index][call_index] = bfcl_call_string(moved)
        written.append(Trajectory(conversation.id, "positional_argument", _text_turns(strings),
                                  f"turn {turn_index}: {bfcl_call_string(moved)}"))
    return written


def _text_turns(turns: Sequence[Sequence[str]]) -> tuple[tuple[Step, ...], ...]:
    """Call strings as text steps, one call per step (several where the step limit asks, as ``_steps``)."""
    out = []
    for turn in turns:
        size = max(1, math.ceil(len(turn) / MAXIMUM_STEP_LIMIT))
        out.append(tuple(Text(tuple(turn[start:start + size])) for start in range(0, len(turn), size)))
    return tuple(out)


def _numbers_as_strings(call: ToolCall) -> ToolCall:
    def text(value: Any) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        if isinstance(value, list):
            return [text(item) for item in value]
        if isinstance(value, dict):
            return {key: text(item) for key, item in value.items()}
        return value

    return ToolCall(call.name, {key: text(value) for key, value in call.arguments.items()})




# --------------------------------------------------------------------------- bfcl-eval reference


def bfcl_call_string(call: ToolCall) -> str:
    """The call as one of bfcl-eval's decoded call strings: positional, then keyword arguments, values as Python
    literals."""
    parts = [repr(value) for value in call.positional] + [f"{key}={value!r}" for key, value in call.arguments.items()]
    return f"{call.name}({', '.join(parts)})"


def _reference_step(step: Step) -> list[str]:
    return list(step.calls) if isinstance(step, Text) else [bfcl_call_string(call) for call in step]


@dataclass(frozen=True)
class ReferenceVerdict:
    """bfcl-eval's verdict; ``defaults_changed`` names the API methods whose default arguments it mutated."""

    valid: bool
    error_type: str | None
    message: str
    defaults_changed: tuple[str, ...] = ()


class BfclReference:
    """bfcl-eval's multi-turn scoring of decoded trajectories, as its eval runner calls it, each as in a fresh process.

    bfcl-eval runs the model's and the ground truth's instances in one
    process, where they share the methods' default arguments: a mutable
    default (``TwitterAPI.post_tweet``'s ``mentions=[]``, which ``mention``
    extends in place) changed by one call is seen by every later call, on
    both sides and in every later entry. So that each trajectory is scored as
    bfcl-eval scores it alone, the defaults of the API classes' methods are
    recorded once and put back after every verdict; the verdict names those
    that had changed.
    """

    def __init__(self, category: str, extra_entries: Sequence[Mapping[str, Any]] = ()) -> None:
        """The category's entries and ground truths, plus ``extra_entries`` (entries with their ``ground_truth``)."""
        import bfcl_eval
        from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

        data = Path(bfcl_eval.__file__).parent / "data"
        self._checker = multi_turn_checker
        self._instances = vars(multi_turn_utils)  # the executor's globals(): where its instances live
        self._entries = {entry["id"]: entry for entry in _jsonl(data / f"BFCL_v4_{category}.json")}
        self._truth = {entry["id"]: entry["ground_truth"]
                       for entry in _jsonl(data / "possible_answer" / f"BFCL_v4_{category}.json")}
        for entry in extra_entries:
            self._entries[entry["id"]] = dict(entry)
            self._truth[entry["id"]] = entry["ground_truth"]
        self._names = itertools.count()
        self._defaults = _method_defaults()

    def raw_truth(self, entry_id: str) -> list[list[str]]:
        """The entry's ground truth as BFCL writes it (call strings, positional arguments included)."""
        return [list(turn) for turn in self._truth[entry_id]]

    def verdict(self, trajectory: Trajectory) -> ReferenceVerdict:
        entry = self._entries[trajectory.entry_id]
        truth = self._truth[trajectory.entry_id]
        decoded = [[_reference_step(step) for step in turn if _reference_step(step)] for turn in trajectory.turns]
        if len(decoded) != len(truth):
            return ReferenceVerdict(False, "multi_turn:force_terminated", "turn count differs")
        model_name = f"promptgrid_reference_{next(self._names)}"
        try:
            result = self._checker(decoded, truth, dict(entry), entry["id"].rsplit("_", 1)[0], model_name)
        except Exception as error:  # noqa: BLE001 - a crash of the reference is reported, not raised
            result = {"valid": False, "error_type": "reference_crashed",
                      "error_message": f"{type(error).__name__}: {error}"}
        finally:
            for name in [name for name in self._instances if name.startswith(model_name + "_")]:
                del self._instances[name]
        changed = self._restore_defaults()
        if result["valid"]:
            return ReferenceVerdict(True, None, "", changed)
        return ReferenceVerdict(False, result.get("error_type"), str(result.get("error_message", "")), changed)

    def _restore_defaults(self) -> tuple[str, ...]:
        changed = []
        for (function, attribute), (label, pristine) in self._defaults.items():
            if getattr(function, attribute) != pristine:
                changed.append(label)
                setattr(function, attribute, copy.deepcopy(pristine))
        return tuple(sorted(changed))


def _method_defaults() -> dict[tuple[Any, str], tuple[str, Any]]:
    """(function, "__defaults__" or "__kwdefaults__") -> (label, a copy) for every method of bfcl's API classes."""
    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING

    found = {}
    for class_name, module_name in CLASS_FILE_PATH_MAPPING.items():
        if class_name in ("WebSearchAPI",) or class_name.startswith("MemoryAPI"):
            continue  # not multi-turn classes; their modules need packages of their own
        cls = getattr(importlib.import_module(module_name), class_name)
        for name, function in inspect.getmembers(cls, inspect.isfunction):
            for attribute in ("__defaults__", "__kwdefaults__"):
                if getattr(function, attribute):
                    found[(function, attribute)] = (f"{class_name}.{name}",
                                                    copy.deepcopy(getattr(function, attribute)))
    return found


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


# --------------------------------------------------------------------------- comparison


@dataclass(frozen=True)
class Row:
    """One trajectory's two verdicts and timings.

    ``ours_s`` is ``check_conversation`` given the conversation's ground-truth
    run; ``truth_s`` is that run (``run_ground_truth``), made once per entry
    and shared by its four trajectories.
    """

    trajectory: Trajectory
    ours: Verdict
    reference: ReferenceVerdict
    ours_s: float
    truth_s: float
    reference_s: float

    @property
    def agrees(self) -> bool:
        return self.ours.valid == self.reference.valid

    @property
    def same_error_type(self) -> bool:
        return self.ours.error_code.bfcl_error_type == self.reference.error_type


def compare(conversations: Sequence[Conversation], *, seed: int = 0, category: str = "multi_turn_base",
            make_env: Callable[..., Any] = Environment, strict_arguments: bool = False,
            kinds: Sequence[str] = KINDS) -> list[Row]:
    """Every trajectory (of ``kinds``) of every conversation, scored by both checkers and timed; promptgrid's
    under the argument rule ``strict_arguments`` chooses."""
    reference = BfclReference(category)
    rows = []
    for conversation in conversations:
        trajectories = build_trajectories(conversation, seed=seed, make_env=make_env) \
            if set(kinds) & set(MUTATIONS) else []
        if set(kinds) & set(WRITTEN):
            trajectories += build_written(conversation, reference.raw_truth(conversation.id), seed=seed)
        trajectories = [trajectory for trajectory in trajectories if trajectory.kind in kinds]
        start = time.perf_counter()
        truth = run_ground_truth(conversation, make_env=make_env)
        truth_s = time.perf_counter() - start
        for trajectory in trajectories:
            start = time.perf_counter()
            ours = check_conversation(conversation, trajectory.model_turns(), make_env=make_env, ground_truth=truth,
                                      strict_arguments=strict_arguments)
            middle = time.perf_counter()
            theirs = reference.verdict(trajectory)
            rows.append(Row(trajectory, ours, theirs, middle - start, truth_s, time.perf_counter() - middle))
    return rows


def _verdict_text(verdict: Verdict) -> str:
    if verdict.valid:
        return "valid"
    failed = verdict.first_failure
    assert failed is not None and failed.failure_mode is not None
    return f"invalid (turn {failed.turn}: {failed.failure_mode.value}, {failed.error_code.bfcl_error_type})"


def _why(verdict: Verdict) -> str:
    failed = verdict.first_failure
    if failed is None:
        return ""
    keep = ("state_differences", "missing_results", "missing_calls", "extra_calls", "refused", "decode_failures")
    details = failed.details or {}
    return json.dumps({key: details[key] for key in keep if details.get(key)}, default=repr)[:600]


def report(rows: Sequence[Row]) -> str:
    """The agreement table, the disagreements and the timings, as Markdown."""
    lines = ["| trajectories | n | verdicts agree | promptgrid valid | bfcl-eval valid "
             "| both invalid: same error type |", "|---|---:|---:|---:|---:|---:|"]
    by_kind: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        by_kind[row.trajectory.kind].append(row)
    for kind, group in [*((kind, by_kind[kind]) for kind in KINDS if by_kind[kind]), ("all", list(rows))]:
        both_invalid = [row for row in group if not row.ours.valid and not row.reference.valid]
        lines.append(f"| {kind} | {len(group)} | {sum(row.agrees for row in group)} "
                     f"| {sum(row.ours.valid for row in group)} | {sum(row.reference.valid for row in group)} "
                     f"| {sum(row.same_error_type for row in both_invalid)}/{len(both_invalid)} |")
    disagreements = [row for row in rows if not row.agrees]
    kinds = Counter(row.trajectory.kind for row in disagreements)
    lines += ["", f"Disagreements: {len(disagreements)}"
              + (f" ({', '.join(f'{kind} {count}' for kind, count in kinds.most_common())})" if kinds else "")]
    for row in disagreements:
        lines += [f"- {row.trajectory.entry_id} {row.trajectory.kind} ({row.trajectory.note or 'unchanged'}): "
                  f"promptgrid {_verdict_text(row.ours)}; bfcl-eval "
                  f"{'valid' if row.reference.valid else f'invalid ({row.reference.error_type})'}",
                  f"  promptgrid: {_why(row.ours)}",
                  f"  bfcl-eval: {row.reference.message[:300]}"
                  + (f" [it mutated the shared defaults of {', '.join(row.reference.defaults_changed)}]"
                     if row.reference.defaults_changed else "")]
    type_differences = [row for row in rows if row.agrees and not row.ours.valid and not row.same_error_type]
    if type_differences:
        lines += ["", f"Both invalid, other error type: {len(type_differences)}"]
        lines += [f"- {row.trajectory.entry_id} {row.trajectory.kind}: promptgrid "
                  f"{row.ours.error_code.bfcl_error_type}, bfcl-eval {row.reference.error_type}"
                  for row in type_differences]
    harmless = [row for row in rows if row.trajectory.kind in MUTATIONS[1:] and row.agrees and row.ours.valid]
    if harmless:
        lines += ["", f"Mutations both checkers call valid (the change leaves state and results as the ground "
                  f"truth's): {len(harmless)}"]
        lines += [f"- {row.trajectory.entry_id} {row.trajectory.kind}: {row.trajectory.note}" for row in harmless]
    mutated = [row for row in rows if row.reference.defaults_changed]
    if mutated:
        lines += ["", f"bfcl-eval mutated a method's shared default arguments in {len(mutated)} trajectories "
                  "(put back after each): " + ", ".join(f"{row.trajectory.entry_id} {row.trajectory.kind}"
                                                         for row in mutated)]
    disputed = [row for row in rows if row.ours.argument_rule_disagreements]
    if disputed:
        other = "strict" if rows[0].ours.argument_rule == "bfcl" else "bfcl"
        by = Counter(row.trajectory.kind for row in disputed)
        lines += ["", f"Trajectories with a turn the {other} argument rule scores otherwise: {len(disputed)} ("
                  + ", ".join(f"{kind} {count}" for kind, count in by.most_common()) + "); turns: "
                  + str(sum(row.ours.argument_rule_disagreements for row in rows))]
    modes = Counter(row.ours.failure_mode.value for row in rows if row.ours.failure_mode is not None)
    lines += ["", "promptgrid failure modes (first failed turn): "
              + ", ".join(f"{mode} {count}" for mode, count in modes.most_common())]
    shares = Counter(row.trajectory.entry_id for row in rows)
    alone = [(row.ours_s + row.truth_s) * 1000 for row in rows]
    shared = [(row.ours_s + row.truth_s / shares[row.trajectory.entry_id]) * 1000 for row in rows]
    theirs = [row.reference_s * 1000 for row in rows]
    lines += ["", "| per trajectory (ms) | mean | median | max | total (s) |", "|---|---:|---:|---:|---:|",
              _timing("promptgrid, ground truth run for each trajectory", alone),
              _timing("promptgrid, ground-truth run shared by the entry's trajectories", shared),
              _timing("bfcl-eval multi_turn_checker (in-process eval)", theirs)]
    return "\n".join(lines)


def _timing(label: str, values: Sequence[float]) -> str:
    return (f"| {label} | {statistics.fmean(values):.1f} | {statistics.median(values):.1f} | {max(values):.1f} "
            f"| {sum(values) / 1000:.1f} |")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--category", default="multi_turn_base",
                        choices=["multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param",
                                 "multi_turn_long_context"])
    parser.add_argument("--limit", type=int, default=None, help="the first N entries only")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--strict-arguments", action="store_true",
                        help="score promptgrid's side under the strict argument rule (arguments validated against "
                             "the function docs); the differences are then the documented ones")
    parser.add_argument("--kind", action="append", choices=KINDS, help="only these trajectory kinds (repeatable)")
    args = parser.parse_args(argv)
    conversations = load_conversations(f"bfcl:{args.category}", limit=args.limit)
    start = time.perf_counter()
    rows = compare(conversations, seed=args.seed, category=args.category, strict_arguments=args.strict_arguments,
                   kinds=tuple(args.kind or KINDS))
    rule = "strict" if args.strict_arguments else "bfcl (lenient)"
    print(f"{args.category}: {len(conversations)} entries, {len(rows)} trajectories, seed {args.seed}, "
          f"arguments: {rule}, {time.perf_counter() - start:.1f} s in all\n")
    print(report(rows))
    return 0 if all(row.agrees for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
