"""Scripted offline models: ``fake/ground-truth``, ``fake/hostile`` and ``fake/noisy``.

They answer from where they are asked: in a conversation run from where the
episode stands (``promptgrid.matrix.conversations``' ``EpisodeContext``: the
conversation, the turn, the step, the request, the repeat; read by attribute,
so this module imports nothing of the conversations package, which imports
the clients); in a single-turn run from the job (``JobIds`` with the
job's variant and case: the runner passes them to a client that sets
``takes_job_ids``), as a conversation's first step whose ground truth is the
case's (the first acceptable value of each parameter, ``chosen_arguments``;
optional parameters left out). ``fake/auto`` and ``fake/prose`` (the
``FakeClient`` of ``promptgrid.matrix.clients``) need no context.

- ``fake/ground-truth``: at the first step of a turn, the turn's ground-truth
  calls, written in the variant's form (prompt and constrained: the return
  format and tag, with ``format_calls``; native: tool calls with the names the
  tools were sent under); at the next step, or at once for a turn without
  ground truth, an answer without calls (prompt: a sentence; constrained: the
  format's empty list; native: text only). It should score every entry.
- ``fake/hostile``: the first step of turn ``t`` is attack ``t`` (cycling) of
  ``ATTACKS``: calls to private, dunder and builtin names meant to escape the
  environment (``__class__``, ``__import__``, ``eval``, ``system`` writing a
  canary file); huge numbers (``10**4000``, ``power`` with a 10**8 exponent);
  10,000 calls in one answer; arguments nested 10,000 deep; a Python
  expression that would write the canary file if evaluated. The next step ends
  the turn. A safe run finishes with no canary file (``CANARY``) and every
  step bounded.
- ``fake/noisy`` (``fake/noisy:SEED``; seed 0 without one): a realistic,
  imperfect model. A step that needs calls is answered as ``fake/ground-truth``
  answers it with the probability ``NOISY_RIGHT`` gives for the variant's
  (call mode, return format), otherwise with one error drawn from
  ``NOISY_ERRORS`` (weights per call mode and return format): a
  language-tagged code fence, a prose prefix ("Sure! Here is the call:"),
  prose instead of the call, single-quoted JSON, XML cut off, a positional
  argument (Python), a number written as a string, a near-miss value, another
  offered function (constrained: the grammar keeps the syntax right), native
  arguments that are not JSON. A step that needs no call gets a call of the
  first offered function when the draw goes wrong. Whether an error is scored
  wrong is the decoder's and the checker's business: bfcl-eval's JSON and XML
  decoders read a fenced or prefixed answer, for instance. The draw is a
  ``random.Random`` seeded with (seed, variant id, case or conversation id,
  turn, step, and the repeat when the temperature is above 0): the same seed
  gives the same answers in any process, at any concurrency.

Any of them takes ``@SECONDS`` for a latency (``fake/noisy:3@0.05``).
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from promptgrid.errors import PromptgridError, RunError
from promptgrid.variants import CallMode, ReturnFormat, Variant

from ._base import Completion, OfflineClient

__all__ = ["ATTACKS", "CANARY", "NOISE_KINDS", "NOISY_ERRORS", "NOISY_RIGHT", "SCRIPTED_MODELS", "ScriptedClient",
           "chosen_arguments", "parse_scripted"]

SCRIPTED_MODELS = ("fake/ground-truth", "fake/hostile", "fake/noisy")
CANARY = "promptgrid_hostile_canary"
"""The file the hostile model's calls would create (in the working directory, and in /tmp) if anything ran them."""

ATTACKS = ("escape", "huge_numbers", "many_calls", "deep_nesting", "code_injection")
_MANY = 10_000
_DEPTH = 10_000
_END_TEXT = "I have done what you asked."

_P, _C, _N = CallMode.PROMPT, CallMode.CONSTRAINED, CallMode.NATIVE
_PY, _JS, _VX, _CX = ReturnFormat.PYTHON, ReturnFormat.JSON, ReturnFormat.VERBOSE_XML, ReturnFormat.CONCISE_XML

NOISY_RIGHT: Mapping[tuple[CallMode, ReturnFormat | None], float] = {
    (_P, _PY): 0.85, (_P, _JS): 0.75, (_P, _VX): 0.55, (_P, _CX): 0.4,
    (_C, _PY): 0.92, (_C, _JS): 0.92, (_C, _VX): 0.9, (_C, _CX): 0.9,
    (_N, None): 0.8,
}
"""``fake/noisy``: the chance that a step which needs calls is answered right, per (call mode, return format);
native answers are keyed by the call mode alone."""

NOISE_KINDS = ("fence", "prose_prefix", "prose", "single_quotes", "truncated_xml", "positional", "number_string",
               "wrong_value", "wrong_function", "bad_arguments")
"""The errors ``fake/noisy`` makes (module docstring)."""

_PROMPT_NOISE = {"fence": 2, "prose_prefix": 2, "prose": 1, "number_string": 1, "wrong_value": 2}
NOISY_ERRORS: Mapping[tuple[CallMode, ReturnFormat | None], Mapping[str, int]] = {
    (_P, _PY): {**_PROMPT_NOISE, "positional": 2},
    (_P, _JS): {**_PROMPT_NOISE, "single_quotes": 4},
    (_P, _VX): {**_PROMPT_NOISE, "truncated_xml": 4},
    (_P, _CX): {**_PROMPT_NOISE, "truncated_xml": 4},
    **{(_C, fmt): {"wrong_value": 3, "wrong_function": 1} for fmt in ReturnFormat},
    (_N, None): {"bad_arguments": 3, "number_string": 2, "wrong_value": 2, "prose": 1},
}
"""``fake/noisy``: when a step is answered wrong, the weight of each error kind, per (call mode, return format).
A kind that cannot apply to the step (no number to quote, a single offered function) gives way to the next one
drawn; a step where none applies is answered right."""

_FENCE_LANGUAGE = {_PY: "python", _JS: "json", _VX: "xml", _CX: "xml"}


def parse_scripted(name: str) -> tuple[str, int, float] | None:
    """``(model, seed, latency)`` of a scripted model string ``fake/<model>[:SEED][@SECONDS]`` (only
    ``fake/noisy`` takes a seed; 0 without one); ``None`` when ``name`` names no scripted model. Raises
    ``RunError`` for a seed that is not a non-negative integer or a latency that is not a number of seconds."""
    head, _, latency = name.partition("@")
    model, colon, seed = head.partition(":")
    if model not in SCRIPTED_MODELS:
        return None
    if colon and model != "fake/noisy":
        raise RunError(f"model {name!r}: only fake/noisy takes a seed (fake/noisy:SEED); write {model}.")
    if colon and not (seed.isascii() and seed.isdigit()):
        raise RunError(f"model {name!r}: the seed after ':' must be a non-negative integer (fake/noisy:1).")
    try:
        seconds = float(latency) if latency else 0.0
    except ValueError:
        raise RunError(f"fake model {name!r}: latency after '@' must be a number of seconds.") from None
    if not 0.0 <= seconds <= 3600.0:
        raise RunError(f"fake model {name!r}: latency after '@' must be between 0 and 3600 seconds.")
    return model, int(seed) if colon else 0, seconds


@dataclass(frozen=True)
class _Ask:
    """What a scripted model answers from, for a conversation step or a single-turn case alike."""

    variant: Variant
    case_id: str
    repeat: int
    turn: int
    step: int
    functions: tuple[Mapping[str, Any], ...]
    truth: tuple[tuple[str, dict[str, Any]], ...]
    """The calls that answer this turn (single-turn: the case's ground truth, first acceptable values)."""
    request: Mapping[str, Any] | None


def chosen_arguments(params: Mapping[str, Any]) -> dict[str, Any]:
    """One call's arguments from a single-turn ground truth's acceptable values (``{param: [value, ...]}``):
    the first acceptable value of each parameter, nested dicts likewise; a parameter whose first acceptable
    value is ``""`` (optional) is left out."""
    out: dict[str, Any] = {}
    for key, accepted in params.items():
        values = accepted if isinstance(accepted, list) else [accepted]
        if values and values[0] != "":
            out[str(key)] = _concrete(values[0])
    return out


def _concrete(value: Any) -> Any:
    if isinstance(value, Mapping):
        return chosen_arguments(value)
    if isinstance(value, list):
        return [_concrete(v) if isinstance(v, Mapping) else v for v in value]
    return value


def _escape_calls() -> list[tuple[str, dict[str, Any]]]:
    touch = f"open('{CANARY}', 'w').write('x'); open('/tmp/{CANARY}', 'w').write('x')"
    return [("__class__", {}), ("_load_scenario", {"scenario": {}}), ("__init__", {}),
            ("__getattribute__", {"name": "__dict__"}), ("__import__", {"name": "os"}),
            ("eval", {"source": touch}), ("exec", {"source": touch}), ("system", {"command": f"touch {CANARY}"}),
            ("__subclasses__", {}), ("GorillaFileSystem.__init__", {})]


def _number_calls(functions: Sequence[Mapping[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = [("power", {"base": 10, "exponent": 10**8})]
    for doc in functions:
        props = (doc.get("parameters") or {}).get("properties") or {}
        for name, schema in props.items():
            if isinstance(schema, Mapping) and schema.get("type") in ("integer", "float", "number"):
                calls.append((str(doc["name"]), {name: 10**4000 if schema.get("type") == "integer" else 1e308}))
                break
    return calls


def _first_function(functions: Sequence[Mapping[str, Any]]) -> str:
    return str(functions[0]["name"]) if functions else "ls"


def _near_miss(value: Any) -> Any:
    """A plausible wrong value in place of ``value`` (what a model that misread the request passes)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 2 + 1
    if isinstance(value, str):
        return f"{value}_copy" if value else "default"
    if isinstance(value, list):
        return value[:-1] if value else ["item"]
    if isinstance(value, Mapping):
        return {}
    return "none"


def _positional(text: str, fmt: ReturnFormat, tag: bool, calls: list[tuple[str, dict[str, Any]]]) -> str | None:
    """Python only: the calls written with the first argument of the first call with arguments positional."""
    with_args = [i for i, (_, args) in enumerate(calls) if args]
    if fmt is not ReturnFormat.PYTHON or not with_args:
        return None
    from promptgrid.matrix.calling._format import python_literal

    i = with_args[0]
    written = []
    for j, (name, args) in enumerate(calls):
        parts = [f"{k}={python_literal(v)}" for k, v in args.items()]
        if j == i:
            parts[0] = python_literal(next(iter(args.values())))
        written.append(f"{name}({', '.join(parts)})")
    text = "[" + ", ".join(written) + "]"
    return f"<TOOLCALL>{text}</TOOLCALL>" if tag else text


_TEXT_NOISE: Mapping[str, Callable[[str, ReturnFormat, bool, list[tuple[str, dict[str, Any]]]], str | None]] = {
    "fence": lambda text, fmt, tag, calls: f"```{_FENCE_LANGUAGE[fmt]}\n{text}\n```",
    "prose_prefix": lambda text, fmt, tag, calls: f"Sure! Here is the call:\n{text}",
    "single_quotes": lambda text, fmt, tag, calls: text.replace('"', "'") if fmt is ReturnFormat.JSON else None,
    "truncated_xml": lambda text, fmt, tag, calls: text[:len(text) * 2 // 3] if fmt in (_VX, _CX) else None,
    "positional": _positional,
}
"""The errors of the written answer (prompt and constrained modes): kind -> the wrong text made from the right
one (``text``), or ``None`` when the kind cannot apply to the return format."""

class ScriptedClient(OfflineClient):
    """A fake answering from where it is asked: a conversation step (the runner passes the ``EpisodeContext``)
    or a single-turn job (the runner passes ``JobIds`` with the job's variant and case). Module docstring."""

    takes_episode = True
    takes_job_ids = True

    def __init__(self, name: str) -> None:
        parsed = parse_scripted(name)
        if parsed is None:
            raise RunError(f"unknown scripted model {name!r}: use one of {', '.join(SCRIPTED_MODELS)} "
                           "(fake/noisy:SEED for another seed; optionally @SECONDS).")
        self.name = name
        self.model, self.seed, self.latency = parsed

    async def complete(self, messages: Any, params: Mapping[str, Any], *, request: Mapping[str, Any] | None = None,
                       episode: Any = None, job: Any = None) -> Completion:
        ask = self._ask(request, episode, job)
        if self.latency:
            await asyncio.sleep(self.latency)
        if ask.step > 0:
            return self._end(ask)
        if self.model == "fake/ground-truth":
            return self._calls(ask, list(ask.truth)) if ask.truth else self._end(ask)
        if self.model == "fake/noisy":
            return self._noisy(ask, params)
        return self._attack(ask)

    def _ask(self, request: Mapping[str, Any] | None, episode: Any, job: Any) -> _Ask:
        if episode is not None:
            conversation, turn = episode.conversation, episode.turn
            truth = tuple((c.name, dict(c.arguments)) for c in conversation.ground_truth[turn])
            return _Ask(episode.variant, conversation.id, getattr(episode, "repeat", 0), turn, episode.step,
                        tuple(conversation.functions_at(turn)), truth, episode.request)
        variant, case = getattr(job, "variant", None), getattr(job, "case", None)
        if variant is None or case is None:
            raise PromptgridError(f"{self.name} answers from the case it is asked about: run it with promptgrid "
                                  "run or pg.run, which pass the job's variant and case.")
        truth = tuple((str(name), chosen_arguments(params)) for call in case.ground_truth
                      for name, params in call.items())
        return _Ask(variant, case.id, int(job.repeat), 0, 0, tuple(case.functions), truth, request)

    # ------------------------------------------------------------------ fake/noisy

    def _noisy(self, ask: _Ask, params: Mapping[str, Any]) -> Completion:
        """Right with probability ``NOISY_RIGHT``, else an error drawn from ``NOISY_ERRORS``. The draw depends on
        the seed, the variant, the case, the turn and the step only (and the repeat when the temperature is
        above 0), never on time, process or the order calls are made in."""
        variant = ask.variant
        key = (variant.call_mode, None if variant.call_mode is _N else variant.return_format)
        sampling = float(params.get("temperature") or 0.0) > 0.0
        rng = random.Random(f"fake/noisy|{self.seed}|{variant.id}|{ask.case_id}|{ask.repeat if sampling else 0}|"
                            f"{ask.turn}|{ask.step}")
        if rng.random() < NOISY_RIGHT[key]:
            return self._calls(ask, list(ask.truth)) if ask.truth else self._end(ask)
        if not ask.truth:  # nothing to call: the error is a call all the same
            return self._calls(ask, [(_first_function(ask.functions), {})])
        weights = dict(NOISY_ERRORS[key])
        while weights:
            kind = rng.choices(list(weights), list(weights.values()))[0]
            del weights[kind]
            answer = self._corrupt(ask, kind)
            if answer is not None:
                return answer
        return self._calls(ask, list(ask.truth))

    def corrupt(self, kind: str, *, request: Mapping[str, Any] | None = None, episode: Any = None,
                job: Any = None) -> Completion | None:
        """The right calls of the step or job asked about (as ``complete`` is asked), with the error ``kind``
        (one of ``NOISE_KINDS``); ``None`` when the kind cannot apply there. For tests and demonstrations."""
        if kind not in NOISE_KINDS:
            raise PromptgridError(f"unknown error kind {kind!r}: use one of {', '.join(NOISE_KINDS)}.")
        return self._corrupt(self._ask(request, episode, job), kind)

    def _corrupt(self, ask: _Ask, kind: str) -> Completion | None:
        """The step's right calls with the error ``kind``, or ``None`` when it cannot apply: errors of the calls
        themselves (``_CALL_NOISE``) in any call mode, errors of the written answer (``_TEXT_NOISE``) in the
        prompt and constrained modes only."""
        calls = [(name, dict(args)) for name, args in ask.truth]
        made = _CALL_NOISE.get(kind)
        if made is not None:
            return made(self, ask, calls)
        variant = ask.variant
        if variant.call_mode is CallMode.NATIVE:
            return None
        from promptgrid.matrix.calling import format_calls

        fmt, tag = variant.return_format, variant.tool_call_tag
        text = format_calls([{name: args} for name, args in calls], fmt, tag)
        written = _TEXT_NOISE.get(kind)
        wrong = None if written is None else written(text, fmt, tag, calls)
        return None if wrong is None else self._text(wrong)

    def _wrong_value(self, ask: _Ask, calls: list[tuple[str, dict[str, Any]]]) -> Completion | None:
        """The first argument of the first call with arguments replaced by a near miss (``_near_miss``)."""
        with_args = [i for i, (_, args) in enumerate(calls) if args]
        if not with_args:
            return None
        name, args = calls[with_args[0]]
        first = next(iter(args))
        args[first] = _near_miss(args[first])
        return self._calls(ask, calls)

    def _number_string(self, ask: _Ask, calls: list[tuple[str, dict[str, Any]]]) -> Completion | None:
        """The first number argument (of the first call that has one) written as a string."""
        for _, args in calls:
            numbers = [k for k, v in args.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
            if numbers:
                args[numbers[0]] = str(args[numbers[0]])
                return self._calls(ask, calls)
        return None

    def _wrong_function(self, ask: _Ask, calls: list[tuple[str, dict[str, Any]]]) -> Completion | None:
        """The first call made to another offered function, with the same arguments."""
        names = [str(doc.get("name")) for doc in ask.functions if str(doc.get("name")) != calls[0][0]]
        if not names:
            return None
        calls[0] = (names[0], calls[0][1])
        return self._calls(ask, calls)

    def _prose(self, ask: _Ask, calls: list[tuple[str, dict[str, Any]]]) -> Completion | None:
        """A sentence about the first call instead of the calls."""
        return self._text(f"I will use {calls[0][0]} to do this.")

    def _bad_arguments(self, ask: _Ask, calls: list[tuple[str, dict[str, Any]]]) -> Completion | None:
        """Native only: the first call's arguments not JSON (a Python dict's text, or ``{``)."""
        if ask.variant.call_mode is not CallMode.NATIVE:
            return None
        sent = self._sent_names(ask)
        bad = [(sent.get(name, name), str(args) if args else "{") for name, args in calls[:1]]
        return self._native(bad + [(sent.get(n, n), json.dumps(a)) for n, a in calls[1:]])

    # ------------------------------------------------------------------ fake/hostile

    def _attack(self, ask: _Ask) -> Completion:
        attack = ATTACKS[ask.turn % len(ATTACKS)]
        if attack == "escape":
            return self._calls(ask, _escape_calls())
        if attack == "huge_numbers":
            return self._calls(ask, _number_calls(ask.functions))
        if attack == "many_calls":
            return self._calls(ask, [(_first_function(ask.functions), {})] * _MANY)
        name = _first_function(ask.functions)
        if attack == "deep_nesting":
            nested = "[" * _DEPTH + "]" * _DEPTH
            if ask.variant.call_mode is CallMode.NATIVE:
                return self._native([(name, '{"value": ' + nested + "}")])
            fmt = ask.variant.return_format
            if fmt is ReturnFormat.PYTHON:
                text = f"[{name}(value={nested})]"
            elif fmt is ReturnFormat.JSON:
                text = f'[{{"function": "{name}", "parameters": {{"value": {nested}}}}}]'
            else:
                text = (f'<functions><function name="{name}"><param name="value" type="array">{nested}</param>'
                        "</function></functions>")
            return self._text(text)
        code = f"[__import__('os').system('touch {CANARY}'), open('/tmp/{CANARY}', 'w')]"
        if ask.variant.call_mode is CallMode.NATIVE:
            return self._native([(code, "{}")])
        return self._text(code)

    # ------------------------------------------------------------------ answers

    @staticmethod
    def _sent_names(ask: _Ask) -> dict[str, str]:
        """Function name -> the name its tool was sent under (native)."""
        return {fn: tool for tool, fn in dict((ask.request or {}).get("tool_names", {})).items()}

    def _calls(self, ask: _Ask, calls: list[tuple[str, dict[str, Any]]]) -> Completion:
        variant = ask.variant
        if variant.call_mode is CallMode.NATIVE:
            sent = self._sent_names(ask)
            return self._native([(sent.get(name, name), json.dumps(args, default=str)) for name, args in calls])
        from promptgrid.matrix.calling import format_calls

        return self._text(format_calls([{name: args} for name, args in calls], variant.return_format,
                                       variant.tool_call_tag))

    def _end(self, ask: _Ask) -> Completion:
        variant = ask.variant
        if variant.call_mode is CallMode.CONSTRAINED:
            from promptgrid.matrix.calling import format_calls

            return self._text(format_calls([], variant.return_format, variant.tool_call_tag))
        return Completion(text=_END_TEXT, finish_reason="stop", input_tokens=0, output_tokens=0, cost_usd=0.0,
                          model=self.name)

    def _text(self, text: str) -> Completion:
        return Completion(text=text, finish_reason="stop", input_tokens=0, output_tokens=len(text) // 4 + 1,
                          cost_usd=0.0, model=self.name)

    def _native(self, calls: list[tuple[str, str]]) -> Completion:
        tool_calls = tuple({"id": f"fake_{i}", "type": "function", "function": {"name": name, "arguments": args}}
                           for i, (name, args) in enumerate(calls))
        return Completion(text="", finish_reason="tool_calls", input_tokens=0, output_tokens=0, cost_usd=0.0,
                          model=self.name, tool_calls=tool_calls)


_CALL_NOISE: Mapping[str, Callable[[ScriptedClient, _Ask, list[tuple[str, dict[str, Any]]]], Completion | None]] = {
    "wrong_value": ScriptedClient._wrong_value, "number_string": ScriptedClient._number_string,
    "wrong_function": ScriptedClient._wrong_function, "prose": ScriptedClient._prose,
    "bad_arguments": ScriptedClient._bad_arguments,
}
"""The errors of the calls themselves (any call mode): kind -> the ``ScriptedClient`` method that makes them."""
