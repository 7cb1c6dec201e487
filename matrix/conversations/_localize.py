"""Conversation datasets translated and checked: the library side of ``promptgrid translate --conversations-out``
and ``promptgrid check-translations --dataset`` (``pg.translate_conversations``,
``pg.check_conversation_translations``).

``_translate`` translates and checks conversation records; this module works on datasets: it loads them, makes
the backend, keeps every translated segment in the translation store as it arrives (so a run that fails in its
third language has paid for the first two once, and a run again sends only what is not stored), and writes the
translated conversations as ``jsonl:`` records, atomically, to a path checked before anything is paid for.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promptgrid.errors import TranslationError

from ._dataset import Conversation
from ._translate import ConversationFinding

__all__ = ["ConversationChecks", "ConversationTranslations", "check_conversation_datasets",
           "translate_conversation_dataset"]

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


def translate_conversation_dataset(
    dataset: str,
    targets: Sequence[str],
    backend: str,
    *,
    out: str | os.PathLike[str] | None = None,
    what: str = "all",
    store: str | os.PathLike[str] | None = None,
    bfcl_data: str | os.PathLike[str] | None = None,
    region: str | None = None,
    formality: str | None = None,
    timeout: float | None = None,
    on_retry: Callable[[str], None] | None = None,
    progress: Callable[[str], None] | None = None,
) -> ConversationTranslations:
    """Translate a conversation dataset into ``targets``; see ``pg.translate_conversations``."""
    from promptgrid.safeio import atomic_output, check_output
    from promptgrid.translate._backends import make_backend
    from promptgrid.translate._store import TranslationStore

    from ._dataset import conversation_to_record, load_conversations
    from ._translate import TranslationUsage, check_conversation_translation, translate_conversations

    if what not in WHAT:
        raise TranslationError(f"what must be one of {', '.join(WHAT)}, not {what!r}.")
    if not targets:
        raise TranslationError("no target language: give at least one, e.g. to='de,ja' (--to de,ja).")
    inputs = [dataset.removeprefix("jsonl:")] if dataset.startswith("jsonl:") else []
    path = Path(out).expanduser() if out is not None else None
    if path is not None:
        check_output(path, inputs=inputs)  # before any translation is paid for
    engine = make_backend(backend, region=region, formality=formality, timeout=timeout, on_retry=on_retry)
    sources = load_conversations(dataset, bfcl_data=bfcl_data)
    usage = TranslationUsage()
    keep = bool(getattr(engine, "masks", True))  # catalogs are looked up, not paid for: nothing to keep
    the_store = TranslationStore(store) if keep else None
    translated: list[Conversation] = []
    findings: list[ConversationFinding] = []
    counts: dict[str, int] = {}
    try:
        for target in targets:
            results = translate_conversations(sources, engine, target, descriptions=what != "instructions",
                                              store=the_store, usage=usage)
            for source, result in zip(sources, results, strict=True):
                translated.append(result.conversation)
                findings.extend(result.problems)
                findings.extend(check_conversation_translation(source, result.conversation, "en", target))
            counts[target] = len(results)
            if progress is not None:
                progress(target)
    finally:
        if the_store is not None:
            the_store.close()
    if path is not None:
        records = "".join(json.dumps(conversation_to_record(c), ensure_ascii=False) + "\n" for c in translated)
        try:
            with atomic_output(path, inputs=inputs) as fh:
                fh.write(records)
        except OSError as exc:
            raise TranslationError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return ConversationTranslations(tuple(translated), tuple(findings), counts, usage.sent, usage.stored,
                                    str(getattr(engine, "name", backend)), path,
                                    the_store.path if the_store is not None else None)


def check_conversation_datasets(
    datasets: Iterable[str],
    languages: Sequence[str] | None = None,
    *,
    back_translate: str | None = None,
    bfcl_data: str | os.PathLike[str] | None = None,
    on_retry: Callable[[str], None] | None = None,
) -> ConversationChecks:
    """Check translated conversations against their English sources; see ``pg.check_conversation_translations``."""
    from promptgrid.translate._backends import make_backend

    from ._dataset import load_conversations
    from ._translate import check_conversation_set, conversation_language

    specs = [datasets] if isinstance(datasets, str) else list(datasets)
    if not specs:
        raise TranslationError("no dataset to check: give the English conversations and their translations, e.g. "
                               "['bfcl:multi_turn_base', 'jsonl:de.jsonl'] (--dataset ... --dataset ...), or "
                               "'mini-mt'.")
    by_language: dict[str, list[Any]] = {}
    for spec in specs:
        for conversation in load_conversations(spec, bfcl_data=bfcl_data):
            by_language.setdefault(conversation_language(conversation), []).append(conversation)
    if languages:
        wanted = set(languages)
        by_language = {lang: c for lang, c in by_language.items() if lang == "en" or lang in wanted}
    if not [lang for lang in by_language if lang != "en"]:
        raise TranslationError(f"{', '.join(specs)} holds no translated conversations to check; give the "
                               "English sources and their translations, e.g. --dataset bfcl:multi_turn_base "
                               "--dataset jsonl:de.jsonl, or --dataset mini-mt")
    back = make_backend(back_translate, on_retry=on_retry) if back_translate else None
    results = check_conversation_set(by_language, back_translator=back)
    return ConversationChecks(results, {lang: len(by_language[lang]) for lang in results})
