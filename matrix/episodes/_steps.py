"""One episode: a model taken through a conversation's turns, step by step, against an environment.

What each variant sends at each step (docs/conversations.md has the same, with examples):

* **First step of turn 0**: the variant's prompt for the conversation's first
  turn (``first_turn_case``; in prompt and constrained mode the system prompt
  with the turn-0 function docs in the variant's doc format, as bfcl-eval's
  prompting handler sends it; in native mode the messages and the tools).
* **After every answer**: the answer as an ``assistant`` message (bfcl-eval
  adds it before decoding). Native: the assistant message carries the tool
  calls (ids ``call_<turn>_<step>_<i>``, made here, so a resumed run sends the
  same bytes) and each result follows as a ``tool`` message. Prompt and
  constrained: the results of the step's calls come back in one ``user``
  message, written for the variant's return format:

  - ``python``: ``repr`` of ``[{"role": "tool", "name": "<call>", "content":
    "<result>"}, ...]`` with each call written ``name(k=repr(v), ...)``:
    byte for byte what bfcl-eval's prompting handlers send;
  - ``json``: the same list as JSON (``name`` the function, ``arguments`` the
    call's arguments, ``content`` the result);
  - ``verbose_xml`` / ``concise_xml``: ``<results><result name="..."
    >...</result></results>``, text escaped.

* **A new user turn**: its messages are appended. A ``miss_func`` turn that
  gives a function back (it has no user message in the data) sends what
  bfcl-eval sends: in prompt and constrained mode a user message with the
  function docs, then a newline and "I have updated some more functions you
  can choose from. What about now?" (bfcl-eval's
  ``DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING``); in native mode the
  tools grow and the user message is that sentence alone. The docs are
  written as bfcl-eval writes them, the Python ``str`` of the list of doc
  dicts (without the language hint, as bfcl-eval holds them out), for a
  variant with its return format and doc format (``python``, ``json``: the
  message is then byte for byte bfcl-eval's); any other variant gets them in
  its own doc format.

A step's answer is decoded in the variant's form: prompt and constrained with
the strict parser in the variant's return format and tag (an OpenAI strict
wrapper unwrapped), native from the tool calls. An answer without calls
(prose, an empty answer, or the format's empty list, which the constrained
grammar admits in conversations) ends the turn. An answer that tries to call
but cannot be decoded ends the turn too, as in bfcl-eval, and is recorded as a
``DecodeFailure`` (bfcl-eval drops it silently). A turn whose calls go past
the step limit (bfcl-eval's 20) is force-quit, and so is the conversation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from promptgrid.matrix.clients._envelope import MAX_STORED_ANSWER_CHARS, stored_response
from promptgrid.matrix.datasets._conversations import Conversation
from promptgrid.matrix.episodes._environment import CallOutcome, ToolCall, decoded_call
from promptgrid.matrix.episodes._first_turn import first_turn_case
from promptgrid.matrix.scoring.state_check import DecodedStep, DecodeFailure
from promptgrid.variants import CallMode, DocFormat, ReturnFormat, Variant

__all__ = ["ADDITIONAL_FUNCTIONS_PROMPT", "EpisodeContext", "Transcript", "call_text", "decode_answer",
           "results_message"]

ADDITIONAL_FUNCTIONS_PROMPT = "I have updated some more functions you can choose from. What about now?"
"""bfcl-eval's ``DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC`` (the prompting form puts the docs before it)."""

_SHOWN = 200  # characters of an undecodable answer kept in the trajectory


@dataclass(frozen=True)
class EpisodeContext:
    """Where an episode stands when its model is asked: passed to scripted models (``fake/ground-truth``)."""

    conversation: Conversation
    variant: Variant
    turn: int
    step: int
    request: Mapping[str, Any] | None
    repeat: int = 0
    """The episode's repeat (0-based): a scripted model sampling at a temperature above 0 varies with it."""


def call_text(call: ToolCall) -> str:
    """A call written as bfcl-eval writes a decoded call: ``name(k=repr(v), ...)``."""
    return f"{call.name}({', '.join(f'{k}={v!r}' for k, v in call.arguments.items())})"


def results_message(variant: Variant, outcomes: Sequence[CallOutcome]) -> dict[str, str]:
    """The ``user`` message that gives a prompt or constrained model its step's results (module docstring)."""
    fmt = variant.return_format
    if fmt is ReturnFormat.PYTHON:
        content = repr([{"role": "tool", "name": call_text(o.call), "content": o.output} for o in outcomes])
    elif fmt is ReturnFormat.JSON:
        content = json.dumps([{"role": "tool", "name": o.call.name, "arguments": dict(o.call.arguments),
                               "content": o.output} for o in outcomes], ensure_ascii=False, default=str)
    else:
        content = "<results>" + "".join(f"<result name={quoteattr(o.call.name)}>{escape(o.output)}</result>"
                                        for o in outcomes) + "</results>"
    return {"role": "user", "content": content}


def decode_answer(variant: Variant, stored: str, request: Mapping[str, Any] | None,
                  functions: Sequence[Mapping[str, Any]], known: Sequence[str] = ()) -> tuple[DecodedStep, bool]:
    """A stored answer as the step's calls, and whether it ends the turn. Never raises on model output.

    ``stored`` is the text (prompt, constrained) or the native envelope; ``request`` the step's request
    (native: its ``tool_names``); ``functions`` the docs offered at this turn (to unwrap a strict answer);
    ``known``: the names of every function of the conversation's classes. A native call of a known function
    that was not offered at this turn (a ``miss_func`` function before it is given back) is decoded by its
    name, as a prompt-mode answer naming it is, and bfcl-eval's executor runs it: the environment, not the
    decoder, decides what runs.
    """
    if variant.call_mode is CallMode.NATIVE:
        from promptgrid.matrix.calling import read_tool_calls
        from promptgrid.matrix.clients import read_envelope

        env = read_envelope(stored)
        if env is None or not env[1]:
            return (), True
        names = {name: name for name in known}
        names.update((request or {}).get("tool_names", {}))
        read = read_tool_calls(env[1], names)
        if read.calls is None:
            return DecodeFailure(stored[:_SHOWN], read.details or str(read.failure)), True
        return tuple(ToolCall(name, dict(args)) for call in read.calls for name, args in call.items()), False
    from promptgrid.matrix.scoring.parse import ParseFailure, parse_response

    text = stored
    if variant.call_mode is CallMode.CONSTRAINED and variant.return_format is ReturnFormat.JSON \
            and text.lstrip().startswith("{"):
        from promptgrid.matrix.calling import unwrap_strict_answer
        from promptgrid.safeio import parse_json_line

        try:
            unwrapped = unwrap_strict_answer(parse_json_line(text.strip()), functions)
        except ValueError:
            unwrapped = None
        text = text if unwrapped is None else unwrapped
    parsed = parse_response(text, variant.return_format, variant.tool_call_tag, positional=True)
    if parsed.failure in (ParseFailure.EMPTY, ParseFailure.PROSE_ONLY):
        return (), True
    if parsed.failure is not None or parsed.calls is None:
        return DecodeFailure(stored[:_SHOWN], parsed.details or str(parsed.failure)), True
    calls = tuple(decoded_call(name, args) for call in parsed.calls for name, args in call.items())
    return calls, not calls


def stored_answer(completion: Any, variant: Variant, *, max_chars: int = MAX_STORED_ANSWER_CHARS) -> str:
    """What is stored of a model's answer, and read back as its message: the text, or, for a native variant, the
    text and the tool calls in one envelope; at most ``max_chars`` characters of it (``clients.stored_response``,
    which a run gives its redaction too)."""
    return stored_response(completion, native=variant.call_mode is CallMode.NATIVE, max_chars=max_chars)


class Transcript:
    """The messages of one episode so far, and the request that goes with the next step."""

    def __init__(self, conversation: Conversation, variant: Variant, renderer: Any) -> None:
        self.conversation, self.variant, self.renderer = conversation, variant, renderer
        self.messages: list[dict[str, Any]] = []
        self.request: dict[str, Any] | None = None
        self.functions: tuple[Mapping[str, Any], ...] = ()
        self.turn = -1

    def open_turn(self, turn: int) -> None:
        """Append turn ``turn``'s user messages (and, at a ``miss_func`` turn, the functions given back)."""
        conversation, variant = self.conversation, self.variant
        self.turn = turn
        if turn == 0:
            prompt = self.renderer.render(variant, first_turn_case(conversation))
            self.messages = [dict(m) for m in prompt.messages]
            self.functions = self._docs(conversation.functions_at(0))
            self.request = self._request(self.functions)
            return
        added = conversation.held_out_functions.get(turn, ()) if conversation.held_out_functions else ()
        if added:
            self.functions = self._docs(conversation.functions_at(turn))
            self.request = self._request(self.functions)
        messages = [dict(m) for m in conversation.turns[turn]]
        if not messages and added:
            if variant.call_mode is CallMode.NATIVE:
                content = ADDITIONAL_FUNCTIONS_PROMPT
            else:
                content = f"{self._given_back_docs(added)}\n{ADDITIONAL_FUNCTIONS_PROMPT}"
            messages = [{"role": "user", "content": content}]
        self.messages.extend(messages)

    def _given_back_docs(self, functions: Sequence[Mapping[str, Any]]) -> str:
        """The docs of the functions a ``miss_func`` turn gives back, as its user message shows them: for a variant
        with bfcl-eval's return format and doc format (``python``, ``json``) the Python ``str`` of the list of docs,
        as bfcl-eval's prompting handler formats them into its prompt (byte-identical transcripts); for any other
        variant, in the variant's own doc format (``render_function_docs``)."""
        docs = [dict(doc) for doc in self._docs(functions)]
        if self.variant.return_format is ReturnFormat.PYTHON and self.variant.doc_format is DocFormat.JSON:
            return str(docs)
        from promptgrid.templates import render_function_docs

        return render_function_docs(docs, self.variant.doc_format)

    def _docs(self, functions: Sequence[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
        """``functions`` with their descriptions in the variant's description language, as the first turn's
        prompt has them (the renderer's ``functions``; English: ``functions`` themselves)."""
        case = replace(first_turn_case(self.conversation), functions=tuple(functions))
        return tuple(self.renderer.functions(self.variant, case))

    def _request(self, functions: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
        if self.variant.call_mode is CallMode.PROMPT:
            return None
        from promptgrid.matrix.calling import call_request

        # Conversations: a constrained answer may be the empty call list (the end of a turn); so the request is
        # built here, from the localized docs, not taken from the renderer's single-turn prompt.
        return call_request(self.variant, functions, min_calls=0)

    def add_answer(self, stored: str, turn: int, step: int) -> None:
        """The model's answer as an assistant message."""
        if self.variant.call_mode is CallMode.NATIVE:
            from promptgrid.matrix.clients import read_envelope

            env = read_envelope(stored)
            content, calls = env if env is not None else (stored, [])
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if calls:
                message["tool_calls"] = [
                    {"id": f"call_{turn}_{step}_{i}", "type": "function",
                     "function": {"name": str((c.get("function") or {}).get("name") or ""),
                                  "arguments": str((c.get("function") or {}).get("arguments") or "{}")}}
                    for i, c in enumerate(calls)]
            self.messages.append(message)
        else:
            self.messages.append({"role": "assistant", "content": stored})

    def add_results(self, outcomes: Sequence[CallOutcome], turn: int, step: int) -> None:
        """The results of a step's calls, in the variant's form (module docstring)."""
        if self.variant.call_mode is CallMode.NATIVE:
            for i, outcome in enumerate(outcomes):
                self.messages.append({"role": "tool", "tool_call_id": f"call_{turn}_{step}_{i}",
                                      "content": outcome.output})
            return
        self.messages.append(results_message(self.variant, outcomes))
