"""promptgrid's multi-turn checker: a conversation's trajectory scored turn by turn, by execution, as BFCL does.

BFCL V4's multi-turn categories do not compare calls with expected calls: they
run them. This module follows the rules of bfcl-eval 2026.3.23
(``eval_checker/multi_turn_eval/multi_turn_checker.py`` and the multi-turn
part of ``eval_runner.py``), re-stated here and implemented on promptgrid's
``Environment`` (BFCL's API classes in a bounded worker process; nothing is
``eval``-ed).

A trajectory is what the model did: per user turn, its steps (one model
answer each), each step the ``ToolCall`` list it decoded to, or a
``DecodeFailure`` marker where the answer could not be decoded.

Per conversation, two environments are built from the entry's classes and
``initial_config``: one for the model, one for the ground truth. Each lives
for the whole conversation, so each carries its own history: the model's
environment has seen every call the model made in earlier turns, the ground
truth's every ground-truth call (bfcl-eval likewise keeps one model instance
and one ground-truth instance per class across turns). Then, turn by turn:

1. Execution. The model's calls of the turn, every step's calls in order,
   run on the model's environment, one ``run`` per step; the turn's
   ground-truth calls run on the other. Every turn runs, also after a failed
   one, so that each environment's state stays the product of its own calls.
   (``run_ground_truth`` runs the ground truth's side ahead, keeping each
   turn's results and end state; a caller that scores several trajectories
   of one conversation keeps that ``GroundTruthRun`` and passes it in.)
2. Irrelevance turn (the ground truth is empty: the request cannot be done
   with the functions or parameters at hand). bfcl-eval's runner checks
   nothing here: the model's calls run, and whatever they change shows up in
   the next turn's state check. Its ``multi_turn_irrelevance_checker`` (any
   decoded call in such a turn fails the entry) is imported by its runner but
   not called since the metric change of gorilla PR #733; with
   ``strict_irrelevance=True`` promptgrid applies that rule.
3. Empty turn. The ground truth has calls and the model made none (no step,
   only empty steps or decode failures): invalid (bfcl:
   ``multi_turn:empty_turn_model_response``).
4. State check. For every involved class, every public attribute of the
   ground truth's instance (``Environment.state()``) must equal the model's
   (bfcl: ``multi_turn:instance_state_mismatch``). Attributes only the model's
   instance has are not compared, as in bfcl-eval, which iterates the ground
   truth's attributes.
5. Response check. Every result of the turn's ground-truth calls must be
   among the results of the model's calls of this turn *and of every earlier
   turn*, in any order, each model result used at most once (a multiset
   containment; bfcl: ``multi_turn:execution_response_mismatch``). Earlier
   turns count because a model may already have fetched in turn 2 what the
   ground truth fetches in turn 3.

A turn is valid when its checks pass; the conversation is valid when every
turn is (bfcl-eval stops at the first failing turn, which gives the same
entry verdict; promptgrid scores every turn, for accuracy by turn position).

Step limit. bfcl-eval's inference stops a turn when the model makes its
21st step with calls (``MAXIMUM_STEP_LIMIT = 20``, counted after executing)
and ends the whole conversation there ("force-quit"); its evaluator then sees
fewer turns than the ground truth has and fails the entry
(``multi_turn:force_terminated``). Here a turn with more than ``step_limit``
steps with calls fails, and the turns a trajectory does not reach (it holds
fewer turns than the conversation) fail as not reached.

Failure modes (``TurnFailureMode``). A failed turn gets exactly one, what the
model did, chosen by this precedence (first match wins):

1.  ``STEP_LIMIT``: more than ``step_limit`` steps with calls in the turn.
2.  ``NOT_REACHED``: the trajectory ends before this turn (a force-quit in an
    earlier turn, as bfcl-eval's inference records it).
3.  ``IRRELEVANCE_VIOLATED``: (``strict_irrelevance`` only) a call in a turn
    whose ground truth is empty.
4.  ``DECODE_FAILURE``: the turn failed and one of its steps could not be
    decoded (``DecodeFailure``): the turn ended there, and what the model
    meant to do after it never ran. A decode failure in a turn that passes
    anyway is kept in the details, not a failure.
5.  ``CALL_REFUSED``: the turn failed and the environment refused one of the
    model's calls of the turn (not a public method of an involved class,
    arguments that are not bounded data or whose positional arguments cannot
    be bound, under the strict rule arguments that do not validate against
    its documentation, over the time, memory or per-step bounds): the
    refused call never ran.
6.  ``MISSING_CALL``: the ground truth has calls, the model made none.
7.  ``EXTRA_STATE_CHANGE``: the state check failed although the model made
    every ground-truth call of the turn (same name and arguments): what it
    called beyond them changed the state.
8.  ``WRONG_END_STATE``: the state check failed otherwise (a state-changing
    call left out, or made with other arguments, or in an order that ends
    elsewhere).
9.  ``MISSING_RESULT``: the state matches, but a ground-truth result is not
    among the model's results (a read-only call left out or asked wrongly).

Argument rule. By default (``"bfcl"``) a call's arguments reach the method
as data, and the method decides, as in bfcl-eval (a string where the doc says
a number may be converted by it; an unknown keyword is its ``TypeError``).
``strict_arguments=True`` (``"strict"``) refuses calls whose arguments do not
validate against the function doc (``Environment``). The environment notes
every call the other rule would treat otherwise; only for a trajectory with
such a call is it scored a second time, under the other rule, and each turn
whose validity differs carries ``argument_rule_disagrees`` in its details.
The verdict records its rule (``Verdict.argument_rule``).

Deviation from bfcl-eval: a step-limit hit in the *last* turn fails it here;
bfcl-eval's runner cannot tell (the turn counts match) and scores that turn by
state. Other deviations, found by ``benchmarks/multi_turn_agreement.py``, are
listed in docs/conversations.md.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from promptgrid.matrix.episodes._environment import CallOutcome, Environment, EnvironmentFailure, ToolCall

from .verdict import ErrorCode, TurnFailureMode, Verdict

if TYPE_CHECKING:
    from promptgrid.matrix.datasets._conversations import Conversation

__all__ = [
    "ARGUMENT_RULES",
    "MAXIMUM_STEP_LIMIT",
    "ConversationVerdict",
    "DecodeFailure",
    "GroundTruthRun",
    "TurnFailureMode",
    "TurnVerdict",
    "check_conversation",
    "conversation_verdict",
    "run_ground_truth",
    "turn_verdict",
]

MAXIMUM_STEP_LIMIT = 20
"""bfcl-eval's ``MAXIMUM_STEP_LIMIT``: a turn is force-quit at its 21st step with calls."""
ARGUMENT_RULES = ("bfcl", "strict")
"""The argument rules by ``strict_arguments`` (``ARGUMENT_RULES[strict_arguments]``): ``"bfcl"``, a call's
arguments reach the method as data and the method decides, as in bfcl-eval; ``"strict"``, they must also
validate against the function doc (``Environment``)."""

# How many differing leaves of one attribute a verdict lists (a long-context file system is large).
_MAX_DIFFERENCES = 10


@dataclass(frozen=True)
class DecodeFailure:
    """A step whose answer could not be decoded into calls; it stands in a trajectory in place of the step's calls.

    bfcl-eval ends the turn at such a step and drops it silently when scoring;
    promptgrid records it in the turn's verdict and names it as the failure
    mode of a turn that fails.
    """

    text: str = ""
    error: str = ""


DecodedStep = Sequence[ToolCall] | DecodeFailure
"""One model answer within a turn: the calls it decoded to (possibly none), or a ``DecodeFailure``."""


TurnVerdict = Verdict
"""A conversation turn's verdict is a ``Verdict`` with its ``turn`` index (``turn_verdict``): this is another name
for it, kept for code written when it was a class of its own."""
ConversationVerdict = Verdict
"""A conversation's verdict is a ``Verdict`` with its ``turns`` (``conversation_verdict``): another name for it."""


def turn_verdict(index: int, valid: bool, failure_mode: TurnFailureMode | None, error_code: ErrorCode,
                 details: Mapping[str, Any]) -> Verdict:
    """How one user turn of a trajectory scored: ``error_code`` is what bfcl-eval records for the check that failed
    (``ErrorCode.VALID`` for a valid turn), so a verdict can be joined with a bfcl-eval score file;
    ``failure_mode`` says what the model did; ``details`` (``Verdict.details``) holds at least ``steps`` and
    ``calls`` (its ``n_predicted_calls``)."""
    return Verdict(valid, error_code, failure_mode, n_predicted_calls=int(details.get("calls", 0)), turn=index,
                   details=details)


def conversation_verdict(turns: Sequence[Verdict], argument_rule: str = "bfcl") -> Verdict:
    """How a whole trajectory scored: valid when every turn is; the first failed turn gives the entry's error code
    and failure mode (what bfcl-eval reports). ``argument_rule``: ``"bfcl"`` (the default: the method decides,
    as in bfcl-eval) or ``"strict"`` (arguments must validate against the function docs)."""
    failed = next((turn for turn in turns if not turn.valid), None)
    return Verdict(failed is None, ErrorCode.VALID if failed is None else failed.error_code,
                   None if failed is None else failed.failure_mode, turns=tuple(turns),
                   details={"argument_rule": argument_rule})


class _Env(Protocol):
    """What the checker needs of an environment (``Environment``'s interface)."""

    def run(self, calls: Sequence[ToolCall]) -> list[CallOutcome]: ...

    def state(self) -> dict[str, dict[str, Any]]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class GroundTruthRun:
    """The ground truth's execution: per turn, the results of its calls and the state after them.

    It depends on the conversation alone, so it can be computed once and
    reused for every trajectory of that conversation (repeats, variants,
    models): each check then starts one environment instead of two.
    ``states[t]`` is ``None`` for a turn without ground-truth calls (no state
    check there). ``refused`` lists ground-truth calls the environment
    refused, as ``turn: name(arguments): reason``; it is empty for a sound
    dataset.
    """

    conversation_id: str
    outputs: tuple[tuple[str, ...], ...]
    states: tuple[Mapping[str, Mapping[str, Any]] | None, ...]
    refused: tuple[str, ...] = ()


def run_ground_truth(conversation: Conversation, *, make_env: Callable[..., _Env] = Environment,
                     strict_arguments: bool = False) -> GroundTruthRun:
    """Run ``conversation``'s ground truth, turn by turn, on one environment that carries the state across turns.
    ``strict_arguments=True`` runs it under the strict argument rule (a sound ground truth gives the same run)."""
    outputs: list[tuple[str, ...]] = []
    states: list[Mapping[str, Mapping[str, Any]] | None] = []
    refused: list[str] = []
    with ExitStack() as stack:
        env = _open(stack, make_env, conversation, strict_arguments)
        turns = [[list(turn)] if turn else [] for turn in conversation.ground_truth]
        ahead = _ahead(env, turns, [bool(turn) for turn in conversation.ground_truth])
        for index, turn in enumerate(conversation.ground_truth):
            if ahead is not None:
                outcomes, view = ahead[index]
            else:
                outcomes, view = (list(_run(env, list(turn), then_state=True)) if turn else []), env
            outputs.append(tuple(outcome.output for outcome in outcomes))
            states.append(view.state() if turn else None)
            refused += [f"{index}: {_show(outcome.call)}: {outcome.refused}" for outcome in outcomes
                        if outcome.refused is not None]
    return GroundTruthRun(conversation.id, tuple(outputs), tuple(states), tuple(refused))


def check_conversation(
    conversation: Conversation,
    model_turns: Sequence[Sequence[DecodedStep]],
    *,
    make_env: Callable[..., _Env] = Environment,
    ground_truth: GroundTruthRun | None = None,
    step_limit: int | None = MAXIMUM_STEP_LIMIT,
    strict_irrelevance: bool = False,
    strict_arguments: bool = False,
) -> Verdict:
    """Score a trajectory against ``conversation``'s ground truth, turn by turn (rules in the module docstring).

    ``model_turns[t][s]`` is step ``s`` of user turn ``t``: the calls the
    model's answer decoded to, or a ``DecodeFailure``. A trajectory may hold
    fewer turns than the conversation (the turns after it are not reached),
    never more. ``make_env(classes, initial_config, long_context=...)`` builds
    an environment, closed before this returns (with ``strict_arguments=True``
    it is also given ``strict_arguments=True``); ``ground_truth`` is the
    conversation's ``run_ground_truth`` when the caller keeps it (otherwise
    it is run here, on an environment of its own). ``step_limit=None`` turns
    the step-limit check off. ``strict_arguments`` chooses the argument rule
    (``"strict"``, or by default ``"bfcl"``; module docstring): when a call
    of the trajectory would be treated otherwise under the other rule, the
    trajectory is scored again under it, and each turn whose validity
    differs says so in its details (``argument_rule_disagrees``).
    """
    expected = conversation.ground_truth
    if len(model_turns) > len(expected):
        raise ValueError(f"the trajectory for {conversation.id} has {len(model_turns)} turns; "
                         f"the conversation has {len(expected)}")
    if ground_truth is None:
        ground_truth = run_ground_truth(conversation, make_env=make_env)
    elif ground_truth.conversation_id != conversation.id or len(ground_truth.states) != len(expected):
        raise ValueError(f"the ground-truth run is for {ground_truth.conversation_id} "
                         f"({len(ground_truth.states)} turns), not {conversation.id} ({len(expected)} turns)")
    def score(strict: bool) -> tuple[list[Verdict], bool]:
        return _score(conversation, model_turns, make_env=make_env, ground_truth=ground_truth,
                      step_limit=step_limit, strict_irrelevance=strict_irrelevance, strict_arguments=strict)

    verdicts, disputed = score(strict_arguments)
    if disputed:
        others, _ = score(not strict_arguments)
        other_rule = ARGUMENT_RULES[not strict_arguments]
        verdicts = [turn if turn.valid == other.valid else replace(turn, details={
            **(turn.details or {}), "argument_rule_disagrees": {
                "other_rule": other_rule, "valid": other.valid,
                "failure_mode": None if other.failure_mode is None else other.failure_mode.value}})
            for turn, other in zip(verdicts, others, strict=True)]
    return conversation_verdict(verdicts, ARGUMENT_RULES[strict_arguments])


def _score(conversation: Conversation, model_turns: Sequence[Sequence[DecodedStep]], *, make_env: Callable[..., _Env],
           ground_truth: GroundTruthRun, step_limit: int | None, strict_irrelevance: bool, strict_arguments: bool
           ) -> tuple[list[Verdict], bool]:
    """The turn verdicts under one argument rule, and whether a call would be treated otherwise under the other
    (``CallOutcome.argument_problem``)."""
    expected = conversation.ground_truth
    verdicts: list[Verdict] = []
    model_outputs: list[str] = []  # every result the model obtained so far, all turns
    disputed = False
    # Every turn's steps with calls, and whether its verdict checks the state (as _judge_turn decides): known
    # ahead, so the whole trajectory goes to the environment in one exchange where it can (_ahead).
    turns = [[list(_calls_of(step)) for step in steps if _calls_of(step)] for steps in model_turns]
    checks = [bool(expected[index]) and bool(calls) and (step_limit is None or len(calls) <= step_limit)
              for index, calls in enumerate(turns)]
    with ExitStack() as stack:
        env = _open(stack, make_env, conversation, strict_arguments)
        ahead = _ahead(env, turns, checks)
        for index, steps in enumerate(model_turns):
            try:
                view: _StateSource = env
                if ahead is not None:
                    outcomes, view = ahead[index]
                else:
                    with_calls = turns[index]
                    outcomes = [outcome for number, calls in enumerate(with_calls) for outcome in
                                _run(env, calls, then_state=checks[index] and number == len(with_calls) - 1)]
                disputed = disputed or any(getattr(outcome, "argument_problem", None) for outcome in outcomes)
                model_outputs.extend(outcome.output for outcome in outcomes)
                verdicts.append(_judge_turn(index, steps, outcomes, tuple(expected[index]),
                                            ground_truth.outputs[index], ground_truth.states[index], model_outputs,
                                            view, step_limit=step_limit, strict_irrelevance=strict_irrelevance))
            except EnvironmentFailure as exc:
                exc.turn = index  # the turn being scored, for the runner's and score-file's message
                raise
    for index in range(len(model_turns), len(expected)):
        verdicts.append(turn_verdict(index, False, TurnFailureMode.NOT_REACHED, ErrorCode.MULTI_TURN_FORCE_TERMINATED,
                                     {"steps": 0, "calls": 0}))
    return verdicts, disputed


def _open(stack: ExitStack, make_env: Callable[..., _Env], conversation: Conversation,
          strict_arguments: bool = False) -> _Env:
    # The keyword only when it is on: a make_env of the caller's (a fake) need not know it.
    extra = {"strict_arguments": True} if strict_arguments else {}
    env = make_env(list(conversation.involved_classes), conversation.initial_config,
                   long_context=conversation.long_context, **extra)
    stack.callback(env.close)
    return env


class _StateSource(Protocol):
    def state(self) -> dict[str, dict[str, Any]]: ...


class _StateAhead:
    """A turn's state as ``run_script`` brought it back (``state()`` as the environment would have given it)."""

    def __init__(self, env: Environment, reply: Any) -> None:
        self.env = env
        self.reply = reply

    def state(self) -> dict[str, dict[str, Any]]:
        if self.reply is None:  # _judge_turn asks exactly where the script was told to bring the state back
            raise RuntimeError("the state of a turn whose state the script did not ask for")
        return self.env.state_of(self.reply)


def _ahead(env: _Env, turns: Sequence[Sequence[list[ToolCall]]], states: Sequence[bool]
           ) -> list[tuple[list[CallOutcome], _StateSource]] | None:
    """Per turn, its outcomes and its state, from one ``Environment.run_script`` exchange; None where it cannot be
    (another kind of environment, or the script fell back: then the turns run step by step)."""
    if not isinstance(env, Environment):
        return None
    steps = [calls for turn in turns for calls in turn]
    wanted = [states[index] and number == len(turn) - 1 for index, turn in enumerate(turns)
              for number in range(len(turn))]
    results = env.run_script(steps, wanted)
    if results is None:
        return None
    out: list[tuple[list[CallOutcome], _StateSource]] = []
    position = 0
    for turn in turns:
        outcomes: list[CallOutcome] = []
        reply = None
        for _calls in turn:
            step_outcomes, state = results[position]
            position += 1
            outcomes += step_outcomes
            reply = state if state is not None else reply
        out.append((outcomes, _StateAhead(env, reply)))
    return out


def _run(env: _Env, calls: list[ToolCall], *, then_state: bool) -> Sequence[CallOutcome]:
    """``env.run(calls)``; an ``Environment`` is asked for its state in the same exchange when ``then_state`` (the
    state check that follows: one exchange with the worker per turn). A caller's ``make_env`` need not know it."""
    if isinstance(env, Environment):
        return env.run(calls, then_state=then_state)
    return env.run(calls)


def _calls_of(step: DecodedStep) -> Sequence[ToolCall]:
    return () if isinstance(step, DecodeFailure) else step


def _judge_turn(
    index: int,
    steps: Sequence[DecodedStep],
    outcomes: Sequence[CallOutcome],
    truth_calls: Sequence[ToolCall],
    truth_outputs: Sequence[str],
    truth_state: Mapping[str, Mapping[str, Any]] | None,
    model_outputs: Sequence[str],
    model_env: _StateSource,
    *,
    step_limit: int | None,
    strict_irrelevance: bool,
) -> Verdict:
    """One turn's verdict; the model's environment has run the turn's calls."""
    details: dict[str, Any] = {"steps": len(steps), "calls": len(outcomes)}
    decode_failures = [{"step": number, "error": step.error} for number, step in enumerate(steps)
                       if isinstance(step, DecodeFailure)]
    refused = [{"call": _show(outcome.call), "reason": outcome.refused} for outcome in outcomes
               if outcome.refused is not None]
    if decode_failures:
        details["decode_failures"] = decode_failures
    if refused:
        details["refused"] = refused

    def failed(mode: TurnFailureMode, code: ErrorCode) -> Verdict:
        return turn_verdict(index, False, mode, code, details)

    steps_with_calls = sum(1 for step in steps if _calls_of(step))
    if step_limit is not None and steps_with_calls > step_limit:
        details["steps_with_calls"] = steps_with_calls
        return failed(TurnFailureMode.STEP_LIMIT, ErrorCode.MULTI_TURN_FORCE_TERMINATED)
    if not truth_calls:
        if strict_irrelevance and outcomes:
            return failed(TurnFailureMode.IRRELEVANCE_VIOLATED, ErrorCode.MULTI_TURN_IRRELEVANCE_DECODER_SUCCESS)
        return turn_verdict(index, True, None, ErrorCode.VALID, details)

    def call_differences() -> tuple[list[str], list[str]]:  # for a failed turn's details only
        return _call_differences([outcome.call for outcome in outcomes], truth_calls)

    def cause(otherwise: TurnFailureMode) -> TurnFailureMode:
        if decode_failures:
            return TurnFailureMode.DECODE_FAILURE
        if refused:
            return TurnFailureMode.CALL_REFUSED
        return otherwise

    if not outcomes:
        return failed(cause(TurnFailureMode.MISSING_CALL), ErrorCode.MULTI_TURN_EMPTY_TURN)
    if truth_state is None:
        raise ValueError(f"the ground-truth run has no state after turn {index}, which has ground-truth calls")
    differences = _state_differences(model_env.state(), truth_state)
    if differences:
        missing_calls, extra_calls = call_differences()
        details.update(state_differences=differences, missing_calls=missing_calls, extra_calls=extra_calls)
        shape = TurnFailureMode.EXTRA_STATE_CHANGE if extra_calls and not missing_calls \
            else TurnFailureMode.WRONG_END_STATE
        return failed(cause(shape), ErrorCode.MULTI_TURN_INSTANCE_STATE_MISMATCH)
    missing = _missing_results(model_outputs, truth_outputs)
    if missing:
        missing_calls, extra_calls = call_differences()
        details.update(missing_results=missing, missing_calls=missing_calls, extra_calls=extra_calls)
        return failed(cause(TurnFailureMode.MISSING_RESULT), ErrorCode.MULTI_TURN_EXECUTION_RESPONSE_MISMATCH)
    return turn_verdict(index, True, None, ErrorCode.VALID, details)


def _missing_results(model_outputs: Sequence[str], truth_outputs: Sequence[str]) -> list[str]:
    """The ground-truth results not among the model's, each model result matching one ground-truth result at most."""
    available = Counter(model_outputs)
    missing = []
    for output in truth_outputs:
        if available[output] > 0:
            available[output] -= 1
        else:
            missing.append(output)
    return missing


def _state_differences(model_state: Mapping[str, Mapping[str, Any]], truth_state: Mapping[str, Mapping[str, Any]]
                       ) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Per class and public attribute of the ground truth's instance, where the model's instance differs."""
    differences: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for class_name, truth_attributes in truth_state.items():
        model_attributes = model_state.get(class_name, {})
        for name, truth_value in truth_attributes.items():
            if name not in model_attributes:
                found = [{"path": name, "model": "<absent>", "ground_truth": _plain(truth_value)}]
            elif model_attributes[name] != truth_value:
                found = list(_leaf_differences(model_attributes[name], truth_value, name))[:_MAX_DIFFERENCES]
            else:
                continue
            differences.setdefault(class_name, {})[name] = found
    return differences


def _leaf_differences(model: Any, truth: Any, path: str) -> Iterator[dict[str, Any]]:
    """Where two equal-typed plain values differ, as paths to the differing leaves (whole values otherwise)."""
    if isinstance(model, Mapping) and isinstance(truth, Mapping):
        for key in truth:
            where = f"{path}.{key}"
            if key not in model:
                yield {"path": where, "model": "<absent>", "ground_truth": _plain(truth[key])}
            elif model[key] != truth[key]:
                yield from _leaf_differences(model[key], truth[key], where)
        for key in model:
            if key not in truth:
                yield {"path": f"{path}.{key}", "model": _plain(model[key]), "ground_truth": "<absent>"}
        return
    if isinstance(model, (list, tuple)) and isinstance(truth, (list, tuple)) and len(model) == len(truth):
        for number, (left, right) in enumerate(zip(model, truth, strict=True)):
            if left != right:
                yield from _leaf_differences(left, right, f"{path}[{number}]")
        return
    yield {"path": path, "model": _plain(model), "ground_truth": _plain(truth)}


def _plain(value: Any) -> Any:
    """``value`` if it is JSON data, else its repr (details must stay serializable)."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
    return value


def _call_differences(model_calls: Sequence[ToolCall], truth_calls: Sequence[ToolCall]
                      ) -> tuple[list[str], list[str]]:
    """(ground-truth calls the model did not make, model calls beyond the ground truth), as multisets."""
    made = Counter(_show(call) for call in model_calls)
    wanted = Counter(_show(call) for call in truth_calls)
    return sorted((wanted - made).elements()), sorted((made - wanted).elements())


def _show(call: ToolCall) -> str:
    """``name(k=v, ...)`` with the arguments in key order (positional ones, of a call that could not be bound,
    first): a call's identity for comparisons and details."""
    arguments = [json.dumps(value, sort_keys=True, default=repr, ensure_ascii=False)
                 for value in getattr(call, "positional", ())]
    arguments += [f"{key}={json.dumps(value, sort_keys=True, default=repr, ensure_ascii=False)}"
                  for key, value in sorted(call.arguments.items())]
    return f"{call.name}({', '.join(arguments)})"
