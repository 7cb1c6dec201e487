"""What ``pg.translate_conversations`` and ``pg.check_conversation_translations`` return (``matrix.api``).

``_translate`` translates and checks conversation records; those two functions work on datasets: they load
them, make the backend, keep every translated segment in the translation store as it arrives (so a run that
fails in its third language has paid for the first two once, and a run again sends only what is not stored),
and write the translated conversations as ``jsonl:`` records, atomically, to a path checked before anything is
paid for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from promptgrid.matrix.datasets._conversations import Conversation
from promptgrid.matrix.datasets._translate_conversations import ConversationFinding

__all__ = ["WHAT", "ConversationChecks", "ConversationTranslations"]

WHAT = ("all", "instructions", "descriptions")
"""What ``what`` may name: the user turns are always translated; ``instructions`` leaves the docs in English."""


@dataclass(frozen=True)
class ConversationTranslations:
    """What ``translate_conversations`` made.

    ``conversations``: the translations, every language in turn (ids ``<id>_<lang>``); ``findings``: the
    problems found while translating (a protected value that did not come back) and by the checks of the
    result; ``languages``: conversations per language; ``sent``: segments sent to the backend (whole texts
    looked up, for a catalog backend); ``stored``:
    segments taken from the translation store instead; ``path``: where the records were written (None: not
    written); ``store``: the translation store used (None: a catalog backend, nothing to keep).
    """

    conversations: tuple[Conversation, ...]
    findings: tuple[ConversationFinding, ...]
    languages: Mapping[str, int]
    sent: int
    stored: int
    backend: str
    path: Path | None = None
    store: Path | None = None

    @property
    def ok(self) -> bool:
        """No finding."""
        return not self.findings

    def __repr__(self) -> str:
        return (f"ConversationTranslations({len(self.conversations)} conversations, {dict(self.languages)}, "
                f"{len(self.findings)} findings, {self.sent} segments sent, {self.stored} from the store)")


@dataclass(frozen=True)
class ConversationChecks:
    """What ``check_conversation_translations`` found: per language, its findings and how many conversations."""

    findings: Mapping[str, list[ConversationFinding]]
    conversations: Mapping[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(self.findings.values())

    @property
    def failures(self) -> list[ConversationFinding]:
        return [f for lang in self.findings for f in self.findings[lang]]

    def __repr__(self) -> str:
        counts = {lang: len(found) for lang, found in self.findings.items()}
        return f"ConversationChecks(findings per language {counts}, conversations {dict(self.conversations)})"
