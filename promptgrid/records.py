"""Records shared by every layer: a test case and the prompt rendered from it.

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

__all__ = ["CATEGORIES", "Case", "Prompt", "messages_sha256"]

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
