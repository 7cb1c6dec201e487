"""Records shared by every layer: a test case, the prompt rendered from it, and a step that answered it.

They live here, in the lowest package, because templates render a ``Case``
and matrix loads, runs and scores it (dependency direction: variants <-
templates <- translate <- matrix).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CATEGORIES", "Case", "Prompt", "Step", "messages_sha256"]

# BFCL's single-turn AST categories (live_* and non-live share the rules) plus
# irrelevance: no function applies and the right answer is no call at all.
CATEGORIES = ("simple", "multiple", "parallel", "parallel_multiple", "irrelevance")

Message = Mapping[str, str]


@dataclass(frozen=True, eq=False)
class Case:
    """One test case.

    ``turns`` are the case's own messages in order (BFCL's ``question[0]``;
    a case may carry its own system message, which bfcl-eval appends to the
    generated system prompt). ``functions`` are BFCL JSON-schema dicts.
    ``ground_truth`` is BFCL's possible-answer form: a list of
    ``{func_name: {param: [acceptable values, ...]}}``; empty for irrelevance.
    ``group`` is shared by the translations of one case (``mini``: the case id
    without its language suffix), so per-language results can be paired.
    """

    id: str
    category: str
    turns: tuple[Message, ...]
    functions: tuple[Mapping[str, Any], ...]
    ground_truth: tuple[Mapping[str, Any], ...] = ()
    language: str = "en"
    group: str = ""
    source: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        """One line (the turns and function schemas are in the fields): id, category, language and counts."""
        return (f"Case({self.id!r}, category={self.category!r}, language={self.language!r}, "
                f"functions={len(self.functions)}, expected_calls={len(self.ground_truth)})")

    @property
    def query(self) -> str:
        """The text of the last user turn (for language checks and reports)."""
        for message in reversed(self.turns):
            if message.get("role") == "user":
                return message.get("content", "")
        return ""


def messages_sha256(messages: list[dict[str, str]] | tuple[Message, ...]) -> str:
    """sha256 over the canonical JSON of the messages (role and content only)."""
    canonical = json.dumps(
        [{"role": m["role"], "content": m["content"]} for m in messages],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True, eq=False)
class Prompt:
    """The chat messages to send for one (variant, case), the request pieces beyond them, and their hash."""

    variant_id: str
    case_id: str
    messages: tuple[dict[str, str], ...]
    request: Mapping[str, Any] | None = None
    """What the call sends beside the messages; ``None`` in prompt call mode. Native:
    ``{"call_mode": "native", "tools": [...], "tool_choice": "auto", "tool_names": {sent: original}}``.
    Constrained: ``{"call_mode": "constrained", "return_format", "tool_call_tag", "json_schema",
    "response_format", "grammar", "unavailable"}`` (see ``promptgrid.matrix.calling.call_request``)."""

    @property
    def sha256(self) -> str:
        """sha256 of the messages (prompt mode: unchanged since the first release), or of the
        messages and the request together, so a constrained prompt never shares a call with its
        prompt-mode twin."""
        if self.request is None:
            return messages_sha256(self.messages)
        canonical = json.dumps(
            {"messages": [{"role": m["role"], "content": m["content"]} for m in self.messages],
             "request": self.request},
            ensure_ascii=False, sort_keys=True, separators=(",", ":"),
        )
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Step:
    """One model call of an episode and what it ended in; a single-turn job is a one-step episode.

    The run store keeps steps in its ``calls`` table, for both kinds of run: a single-turn run's rows are
    shared by the jobs of one prompt (``running.store``, where it is also called ``CallResult``), a
    conversation run's are one per request key (``running.store_episodes``, where it is also called
    ``StoredStep``).
    ``status``: ``done`` (answered: ``response``), ``error`` (failed for good: ``error``, ``error_kind``)
    or ``unsupported`` (never sent: the model cannot do the variant's call mode; the reason in ``error``).
    """

    key: str = ""
    """The request key: a hash of the model, its parameters, the messages (and request) and the repeat."""
    model: str = ""
    repeat: int = 0
    prompt_sha256: str = ""
    """The prompt's hash (``Prompt.sha256``); empty for a conversation step (its key covers the messages)."""
    params: str = ""
    """The generation parameters sent, as canonical JSON; empty for a conversation step."""
    status: str = "done"
    response: str | None = None
    """The answer: text, or for a native call the JSON envelope of its text and tool calls."""
    finish_reason: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    latency_s: float | None = None
    attempts: int = 1
    error: str | None = None
    """Why the call failed, redacted; stored cut to 2,000 characters (``running.store.bounded_error``)."""
    error_kind: str | None = None
    raw_model: str | None = None
    """The model name the provider reported."""
    endpoint: str | None = None
    """The ``api_base`` that answered (or last failed), credentials removed; ``None`` for a provider's default."""

