"""Translating conversations, and checking translated conversations turn by turn.

A conversation is scored by the state its calls leave, so a translation must
not change what the environment has to match: the file names, ids, card
numbers, user names and texts the user mentions and the ground truth uses.
Those are the turn's *protected values* (:func:`protected_values`):

* every string and number the ground-truth calls of the turn and of later
  turns pass as arguments (leaves of lists and objects included): a token the
  user states in turn 0 and a call of turn 1 uses is protected in turn 0.
  Left out: a string that is one of the parameter's ``enum`` values (the model
  picks it from the doc, and the user's word for it, "economy", is prose to
  translate), and a plain lowercase ASCII word that only a later turn's calls
  use ("my photography project" in turn 0, ``cd(folder='photography')`` in
  turn 1): as a word of the text it is prose far more often than a reference;
* a string of ``initial_config`` (values and object keys: file and folder
  names, ids, account and card numbers, user names) that a ground-truth call
  of any turn uses, except a plain lowercase ASCII word ("directory", "file",
  "alex"). A name of the state that no call uses is not protected: a
  translation that changes it changes nothing the scoring compares;

kept only when it occurs verbatim in the turn's text, case-sensitively, as a
whole word (not preceded or followed by a letter, digit or ``_`` where the
value starts or ends with one), and only when it has at least
:data:`MIN_VALUE_CHARS` characters (numbers: at least two digits, "20" in "the
last 20 lines"): shorter values match spuriously. Booleans and ``None`` are
never protected.

:func:`translate_conversation` (:func:`translate_conversations` for many)
translates the user turns and the function and parameter descriptions of
``functions`` and ``held_out_functions`` with any
:class:`~promptgrid.translate.TranslationBackend`: each text is cut and masked
as ``promptgrid translate`` does (``_pipeline.segment``: protected spans, the
turn's protected values and, for a description, its function's code-like
names become tokens ``⟦n⟧``), each unique segment is sent once, and the tokens
are put back and verified. A value that does not come back intact is reported,
never guessed: the turn is kept as translated and a
:class:`ConversationFinding` with ``code="protected_changed"`` names the turn
and the value. The initial state and the ground truth are not changed (their
values are protected, so they still match). The translated conversation's id
gets the target language as suffix (``multi_turn_base_0_de``) and its
category ``:<lang>`` (``multi_turn_base:de``), as the ``mini-mt`` set writes
them, so that both languages can run side by side and be paired again.

:func:`check_conversation_translation` checks a translated conversation
against its source: the number of turns and of messages per turn
(``turn_count``), every turn's text with ``check_translation``
(placeholders, tags, protected spans with the turn's protected values,
language, length, structure), every protected value of the source turn
verbatim in the translated turn (``protected_changed``), and the
descriptions (``turn=None``, unless the docs were left as they were).
:func:`check_conversation_set` pairs conversations across languages by their
template id (``mini_mt_3_de`` with ``mini_mt_3_en``; a translation's id with
its source's) and checks each pair. For localized sets (``protect_from=
"target"``: the entities differ per language by design) it checks only the
language, the length ratio against the English turn, the placeholders and tags,
and that each string value the target's ground truth uses where the source's
uses a value the source turn mentions is in the target turn's text: the
German turn must name the German card number. Values are paired by where the
ground truth uses them: the turn, the function, which call of that function
in the turn, the argument (a German budget is converted from euros by one
more call first, and its ``set_budget_limit`` still pairs with the English
one). As for translations, the ground truth of the turn and of later turns
counts: a token stated in turn 0 and used in turn 1 must be in turn 0. Two
kinds of values are required there: values written the same in every
language, one token with a digit or one of ``_.@#/`` (ids, card numbers,
tokens, file names, addresses); and texts the user dictates, three words or
more or four characters or more of a script written without spaces
(messages, ticket titles and descriptions). Numbers are written and converted
per locale, and shorter names and cities may be localized ("Londres" for the
API's "London"), so they are not required.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from promptgrid.errors import TranslationError
from promptgrid.languages import language_problem
from promptgrid.matrix.datasets._conversations import Conversation
from promptgrid.matrix.episodes._environment import ToolCall
from promptgrid.templates import description_units as template_description_units
from promptgrid.templates import localize_functions
from promptgrid.templates._localization import MissingUnits
from promptgrid.translate._backends import TranslationBackend
from promptgrid.translate._check import CheckCode, check_translation, require_languages
from promptgrid.translate._pipeline import Segmented, segment, send_batches
from promptgrid.translate._store import TranslationStore
from promptgrid.translate._units import description_units

__all__ = [
    "MIN_VALUE_CHARS",
    "PROTECTED_CHANGED",
    "STORE_KIND",
    "TURN_COUNT",
    "ConversationFinding",
    "TranslatedConversation",
    "TranslationUsage",
    "check_conversation_set",
    "check_conversation_translation",
    "conversation_language",
    "protected_values",
    "template_id",
    "translate_conversation",
    "translate_conversations",
]

MIN_VALUE_CHARS = 3
"""Shortest string value protected (numbers: two digits)."""
PROTECTED_CHANGED = CheckCode.PROTECTED_CHANGED.value
"""A protected value of a turn did not come back verbatim."""
TURN_COUNT = "turn_count"
"""The translation has another number of turns, or of messages in a turn, than its source."""
BATCH_SIZE = 50
"""Texts per backend call."""
STORE_KIND = "conversation"
"""The ``kind`` of the segments a conversation translation keeps in the translation store."""
#: The checks that apply to a localized turn (its entities differ from the source's by design).
LOCALIZED_CODES = frozenset({CheckCode.PLACEHOLDER_MISSING, CheckCode.TAG_MISSING, CheckCode.WRONG_LANGUAGE,
                             CheckCode.UNTRANSLATED, CheckCode.LENGTH_RATIO})

ProtectFrom = Literal["source", "target", "auto"]


@dataclass(frozen=True)
class ConversationFinding:
    """One problem of a translated conversation.

    ``turn`` is the user turn's index (``None``: the function descriptions or
    the conversation as a whole); ``code`` a :class:`CheckCode` value,
    ``protected_changed`` or ``turn_count``; ``message`` says what, starting
    with the turn ("turn 2: ..."); ``key`` is the description's key for a
    description finding; ``language`` the target language.
    """

    conversation_id: str
    turn: int | None
    code: str
    message: str
    language: str = ""
    key: str = ""


@dataclass(frozen=True)
class TranslatedConversation:
    """What :func:`translate_conversation` made: the conversation, its turns' protected values, its problems."""

    conversation: Conversation
    source_id: str
    language: str
    protected: Mapping[int, tuple[str, ...]]
    problems: tuple[ConversationFinding, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether every protected value and span came back intact."""
        return not self.problems


# --------------------------------------------------------------------------- protected values

def _leaves(value: Any) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """``(path, leaf)`` for each string or number inside ``value`` (lists and objects walked)."""
    stack: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, Mapping):
            stack.extend(((*path, k), v) for k, v in reversed(list(node.items())))
        elif isinstance(node, (list, tuple)):
            stack.extend(((*path, i), v) for i, v in reversed(list(enumerate(node))))
        elif isinstance(node, str) or (isinstance(node, (int, float)) and not isinstance(node, bool)):
            yield path, node


def _forms(value: str | int | float) -> tuple[str, ...]:
    """How a value is written in a text: a string as it is; a number as ``20`` (also for ``20.0``) or ``2.5``."""
    if isinstance(value, str):
        return (value,) if len(value.strip()) >= MIN_VALUE_CHARS and value == value.strip() else ()
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return ()
        text = str(int(value)) if value.is_integer() else repr(value)
    else:
        text = str(value)
    return (text,) if sum(c.isdigit() for c in text) >= 2 else ()


def _enum_values(functions: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], set[str]]:
    """``(function, parameter) -> enum values`` of the docs (top-level parameters)."""
    out: dict[tuple[str, str], set[str]] = {}
    for doc in functions:
        params = doc.get("parameters")
        props = params.get("properties") if isinstance(params, Mapping) else None
        if not isinstance(props, Mapping):
            continue
        for name, schema in props.items():
            if isinstance(schema, Mapping) and isinstance(schema.get("enum"), list):
                out[(str(doc.get("name")), str(name))] = {str(v) for v in schema["enum"]}
            items = schema.get("items") if isinstance(schema, Mapping) else None
            if isinstance(items, Mapping) and isinstance(items.get("enum"), list):
                out.setdefault((str(doc.get("name")), str(name)), set()).update(str(v) for v in items["enum"])
    return out


def _truth_values(conversation: Conversation) -> dict[int, list[tuple[tuple[Any, ...], str, bool]]]:
    """Per turn, ``(path, written form, is a string)`` of its ground-truth argument values (enum values left out).

    A path is ``(turn, function, n, argument, sub-path...)`` (the turn's ``n``-th call of that function): the
    same path in two languages of a localized conversation holds the same entity, also where one language
    has calls the other has not (a budget in euros is converted first, one in dollars is not).
    """
    enums = _enum_values(conversation.functions_at(len(conversation.turns)))
    out: dict[int, list[tuple[tuple[Any, ...], str, bool]]] = {}
    for turn, calls in enumerate(conversation.ground_truth):
        values: list[tuple[tuple[Any, ...], str, bool]] = []
        seen: dict[str, int] = {}
        for call in calls:
            nth = seen[call.name] = seen.get(call.name, -1) + 1
            for argument, value in dict(call.arguments).items():
                allowed = enums.get((call.name, str(argument)), set())
                for sub, leaf in _leaves(value):
                    if isinstance(leaf, str) and leaf in allowed:
                        continue
                    for form in _forms(leaf):
                        values.append(((turn, call.name, nth, argument, *sub), form, isinstance(leaf, str)))
        out[turn] = values
    return out


def _plain_word(text: str) -> bool:
    return text.isascii() and text.isalpha() and text.islower()


def _config_values(config: Mapping[str, Any]) -> list[str]:
    """The strings of an initial state (values and object keys) that may name an entity (module docstring)."""
    found: dict[str, None] = {}
    stack: list[Any] = [config]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            for key, value in node.items():
                if isinstance(key, str):
                    found[key] = None
                stack.append(value)
        elif isinstance(node, (list, tuple)):
            stack.extend(node)
        elif isinstance(node, str):
            found[node] = None
    return [s for s in found if len(s.strip()) >= MIN_VALUE_CHARS and s == s.strip() and not _plain_word(s)]


#: Scripts written without spaces between words: a value in them needs no word boundary.
_UNSPACED_RE = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\u0e00-\u0eff\uf900-\ufaff]")


def _boundary(ch: str) -> str | None:
    """The characters that may not touch a value that starts or ends with ``ch``.

    An ASCII letter, digit or ``_`` must not touch another one ("tk-ja-2756です" holds ``tk-ja-2756``);
    any other letter or digit must not touch a letter or digit, except in scripts without spaces.
    """
    if ch.isascii():
        return "[A-Za-z0-9_]" if ch.isalnum() or ch == "_" else None
    if not ch.isalnum() or _UNSPACED_RE.match(ch):
        return None
    return r"\w"


def _occurs(value: str, text: str) -> bool:
    """``value`` is in ``text`` as a whole word (see the module docstring), case-sensitively."""
    if not value or value not in text:
        return False
    first, last = _boundary(value[0]), _boundary(value[-1])
    before = f"(?<!{first})" if first else ""
    after = f"(?!{last})" if last else ""
    return re.search(before + re.escape(value) + after, text) is not None


def _turn_text(messages: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(str(m.get("content", "")) for m in messages)


def protected_values(conversation: Conversation) -> dict[int, tuple[str, ...]]:
    """Per user turn, the values the environment must match that appear verbatim in the turn (module docstring).

    Values are listed by where they first occur in the turn's text (longest first at the same place).
    """
    truth = _truth_values(conversation)
    used = {form for values in truth.values() for _path, form, _is_str in values}
    config = [value for value in _config_values(conversation.initial_config) if value in used]
    out: dict[int, tuple[str, ...]] = {}
    for turn, messages in enumerate(conversation.turns):
        text = _turn_text(messages)
        candidates = dict.fromkeys(form for later in range(turn, len(conversation.turns))
                                   for _path, form, is_str in truth.get(later, ())
                                   if later == turn or not (is_str and _plain_word(form)))
        candidates.update(dict.fromkeys(config))
        present = [value for value in candidates if _occurs(value, text)]
        present.sort(key=lambda v: (text.find(v), -len(v)))
        out[turn] = tuple(present)
    return out


def _neutral(value: str) -> bool:
    """A value written the same in every language: one token with a digit or one of ``_.@#/`` (an id, a card
    number, a file name, an address). Names, cities and message texts may be localized ("Londres")."""
    return not any(c.isspace() for c in value) and any(c.isdigit() or c in "_.@#/" for c in value)


def _dictated(value: str) -> bool:
    """A text the user dictates (a message, a ticket title or description): three words or more, or four
    characters or more of a script written without spaces. Shorter names may be localized ("Londres" for the
    API's "London", "Nova York")."""
    return len(value.split()) >= 3 or len(_UNSPACED_RE.findall(value)) >= 4


def _aligned_values(source: Conversation, target: Conversation) -> dict[int, tuple[str, ...]]:
    """Per turn, the target's string ground-truth values at the paths whose source value the source turn mentions."""
    source_truth = _truth_values(source)
    target_at = {path: form for values in _truth_values(target).values() for path, form, is_str in values if is_str}
    out: dict[int, tuple[str, ...]] = {}
    for turn, messages in enumerate(source.turns):
        text = _turn_text(messages)
        required: dict[str, None] = {}
        for later in range(turn, len(source.turns)):
            for path, form, is_str in source_truth.get(later, ()):
                if is_str and path in target_at and _occurs(form, text) and (
                        _neutral(target_at[path]) or _dictated(target_at[path])):
                    required[target_at[path]] = None
        out[turn] = tuple(required)
    return out


# --------------------------------------------------------------------------- translation

def _suffixed(text: str, suffix: str, sep: str) -> str:
    return text if text.endswith(f"{sep}{suffix}") else f"{text}{sep}{suffix}"


@dataclass
class TranslationUsage:
    """What a translation cost: segments sent to the backend, and segments taken from the store instead."""

    sent: int = 0
    stored: int = 0


class _Batch:
    """Texts to translate into one language: each masked segment sent once, in batches.

    With a store, a segment translated before by the same backend into the same language is taken from it,
    and every segment the backend returns is kept there as soon as its batch comes back (with the result of
    ``check_translation``, as ``promptgrid translate`` keeps its units): a run that fails half-way has paid for
    what it stored, and is not charged for it again. Catalog backends (``masks`` False) are looked up, not
    paid for: nothing of theirs is stored.
    """

    def __init__(self, backend: TranslationBackend, source: str, target: str, store: TranslationStore | None = None,
                 usage: TranslationUsage | None = None) -> None:
        self.backend, self.source, self.target = backend, source, target
        self.masks = bool(getattr(backend, "masks", True))
        self.store = store if self.masks else None
        self.usage = usage if usage is not None else TranslationUsage()
        self.pending: dict[str, list[str]] = {}
        """Text to send -> where it is used (conversation id and turn, or description key: the store's keys)."""
        self.done: dict[str, str] = {}

    def add(self, text: str, names: Sequence[str], where: str = "") -> Segmented | str:
        if not self.masks:
            self.pending.setdefault(text, []).append(where)
            return text
        cut = segment(text, names)
        for seg in cut.segments:
            self.pending.setdefault(seg.text, []).append(where)
        return cut

    def run(self) -> None:
        todo = list(self.pending)
        if self.store is not None:
            fresh = []
            for text in todo:
                hit = self.store.get(text, self.target, self.backend.name)
                if hit is None:
                    fresh.append(text)
                else:
                    self.done[text] = hit.text
                    self.usage.stored += 1
            todo = fresh
        self.done.update(send_batches(todo, self.backend, self.source, self.target, batch_size=BATCH_SIZE,
                                      on_batch=self._sent))

    def _sent(self, texts: list[str], translations: list[str]) -> None:
        """One batch back: counted, and kept in the store before the next batch is sent."""
        self.usage.sent += len(texts)
        if self.store is None:
            return
        for text, translation in zip(texts, translations, strict=True):
            check = check_translation(text, translation, self.source, self.target, ())
            self.store.put(text, self.target, self.backend.name, translation, ok=check.ok,
                           problems=[p.value for p in check.problems], details=dict(check.details),
                           kind=STORE_KIND, keys=[w for w in self.pending[text] if w][:20])

    def result(self, item: Segmented | str) -> tuple[str, list[str]]:
        if isinstance(item, str):
            return self.done[item], []
        return item.assemble(self.done)


def _value_problems(values: Sequence[str], translated: str, token_problems: Sequence[str]) -> list[str]:
    """Values not verbatim in ``translated`` that no token problem names already."""
    return [f"protected value {value!r} is not in the translation" for value in values
            if not _occurs(value, translated) and not any(repr(value) in p for p in token_problems)]


def _all_docs(conversation: Conversation) -> list[Mapping[str, Any]]:
    return [*conversation.functions, *(doc for turn in sorted(conversation.held_out_functions)
                                       for doc in conversation.held_out_functions[turn])]


def translate_conversations(conversations: Sequence[Conversation], backend: TranslationBackend, target: str, *,
                            source: str = "en", descriptions: bool = True, store: TranslationStore | None = None,
                            usage: TranslationUsage | None = None) -> list[TranslatedConversation]:
    """:func:`translate_conversation` for many conversations, each unique segment sent once for all of them.

    ``store``: a ``TranslationStore`` open for writing: segments are taken from it and kept in it (``_Batch``).
    ``usage``: counts what was sent and what was taken from the store (added to).
    """
    require_languages({"source language": source, "target language": target})
    batch = _Batch(backend, source, target, store, usage)
    plans = []
    for conversation in conversations:
        protected = protected_values(conversation)
        turns = [[batch.add(str(m.get("content", "")), protected[t], f"{conversation.id} turn {t}")
                  if str(m.get("content", "")).strip() else None
                  for m in messages] for t, messages in enumerate(conversation.turns)]
        docs: dict[tuple[str, str], Segmented | str] = {}
        if descriptions:
            for unit in description_units(_all_docs(conversation)):
                docs[(unit.key, unit.source)] = batch.add(unit.source, unit.protected, unit.key)
        plans.append((conversation, protected, turns, docs))
    batch.run()
    return [_assemble(conversation, protected, turns, docs, batch, target)
            for conversation, protected, turns, docs in plans]


def _assemble(conversation: Conversation, protected: dict[int, tuple[str, ...]],
              turns: list[list[Segmented | str | None]], docs: dict[tuple[str, str], Segmented | str],
              batch: _Batch, target: str) -> TranslatedConversation:
    problems: list[ConversationFinding] = []
    new_turns = []
    for t, (messages, items) in enumerate(zip(conversation.turns, turns, strict=True)):
        new_messages = []
        turn_problems: list[str] = []
        for message, item in zip(messages, items, strict=True):
            if item is None:
                new_messages.append(dict(message))
                continue
            text, issues = batch.result(item)
            turn_problems.extend(issues)
            new_messages.append({**message, "content": text})
        turn_problems.extend(_value_problems(protected[t], _turn_text(new_messages), turn_problems))
        problems.extend(ConversationFinding(conversation.id, t, PROTECTED_CHANGED, f"turn {t}: {p}", target)
                        for p in turn_problems)
        new_turns.append(tuple(new_messages))
    translated = {key: batch.result(item) for key, item in docs.items()}
    for (key, _source), (_text, issues) in translated.items():
        problems.extend(ConversationFinding(conversation.id, None, PROTECTED_CHANGED, f"description {key}: {p}",
                                            target, key) for p in issues)

    by_source = {source: text for (_key, source), (text, _issues) in translated.items()}

    def lookup(source: str, _lang: str, key: str) -> str | None:
        # By the English text, as the catalogs are read: a unit's key may differ from the renderer's (a
        # parameter named "description" is "<function>.description (parameter)").
        found = translated.get((key, source))
        return found[0] if found is not None else by_source.get(source)

    def localize(functions: Sequence[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
        if not docs:
            return tuple(functions)
        return tuple(localize_functions(functions, target, lookup, MissingUnits()))

    result = replace(
        conversation,
        id=_suffixed(conversation.id, target, "_"),
        category=_suffixed(conversation.category, target, ":"),
        turns=tuple(new_turns),
        functions=localize(conversation.functions),
        held_out_functions={turn: localize(held) for turn, held in conversation.held_out_functions.items()},
        language=target,
        template=conversation.template or conversation.id,
    )
    return TranslatedConversation(result, conversation.id, target, protected, tuple(problems))


def translate_conversation(conversation: Conversation, backend: TranslationBackend, target: str, *,
                           source: str = "en", descriptions: bool = True,
                           store: TranslationStore | None = None) -> TranslatedConversation:
    """``conversation`` with its user turns (and, with ``descriptions``, its function docs) translated.

    See the module docstring: protected values are masked, and one that does not come back is a
    ``protected_changed`` problem of its turn; state and ground truth are kept as they are.
    Raises ``TranslationError`` when the backend fails or answers with the wrong number of texts.
    """
    return translate_conversations([conversation], backend, target, source=source, descriptions=descriptions,
                                   store=store)[0]


# --------------------------------------------------------------------------- checks

def _detail(code: CheckCode, details: Mapping[str, Any]) -> str:
    message = details.get(f"{code.value}_problem") or details.get(code.value)
    return f"{code.value}: {message}" if isinstance(message, str) else code.value


def _same_truth(source: Conversation, target: Conversation) -> bool:
    def plain(calls: Sequence[Sequence[ToolCall]]) -> list[list[tuple[str, Any]]]:
        return [[(c.name, dict(c.arguments)) for c in turn] for turn in calls]

    return plain(source.ground_truth) == plain(target.ground_truth) and \
        dict(source.initial_config) == dict(target.initial_config)


def check_conversation_translation(source: Conversation, translated: Conversation, source_lang: str,
                                   target_lang: str, *, protect_from: ProtectFrom = "source",
                                   descriptions: bool = True,
                                   back_translator: Any = None) -> list[ConversationFinding]:
    """The problems of ``translated`` as a translation of ``source`` (module docstring); empty when none.

    ``protect_from="source"``: a translation (same state and ground truth), every check applies and the
    source turn's protected values must be verbatim in the translated turn. ``"target"``: a localized
    conversation (its own entities): language, length, placeholders and tags, and the target's aligned
    ground-truth values in the turn. ``"auto"``: ``source`` when both have the same ground truth and
    initial state, else ``target``. ``back_translator``: a translation backend that also translates every
    turn and description back into ``source_lang`` and scores the similarity (``back_translation_low``;
    translations only: a localized turn names other entities, so it is not sent back). Bad input (other turn
    counts) is a finding, never an exception; an unknown language code raises ``TranslationError``.
    """
    require_languages({"source_lang": source_lang, "target_lang": target_lang})
    if protect_from == "auto":
        protect_from = "source" if _same_truth(source, translated) else "target"
    if protect_from not in ("source", "target"):
        raise ValueError(f"protect_from must be 'source', 'target' or 'auto', not {protect_from!r}")
    back = back_translator if protect_from == "source" else None
    findings: list[ConversationFinding] = []
    if len(source.turns) != len(translated.turns):
        findings.append(ConversationFinding(translated.id, None, TURN_COUNT, f"{len(source.turns)} turns in "
                                            f"{source.id}, {len(translated.turns)} in {translated.id}", target_lang,
                                            ""))
    else:
        check = _TurnCheck(translated.id, source_lang, target_lang, protect_from, back)
        findings.extend(check.turns(source, translated))
    if descriptions:
        findings.extend(_description_findings(source, translated, source_lang, target_lang, back))
    return findings


@dataclass(frozen=True)
class _TurnCheck:
    """How the turns of one translated conversation are checked: its id, the languages, where the protected
    values come from (``source`` or ``target``) and the back-translator (``None``: none)."""

    cid: str
    source_lang: str
    target_lang: str
    protect_from: str
    back: Any

    def turns(self, source: Conversation, translated: Conversation) -> list[ConversationFinding]:
        """The findings of the turns of ``translated`` (as many as the source's), turn by turn, code by code."""
        source_values = protected_values(source)
        names = source_values
        required = source_values
        if self.protect_from == "target":  # its own entities are names too: not prose to judge language and length by
            own = protected_values(translated)
            names = {t: (*source_values[t], *own.get(t, ())) for t in source_values}
            required = _aligned_values(source, translated)
        findings: list[ConversationFinding] = []
        for t, (src_messages, tr_messages) in enumerate(zip(source.turns, translated.turns, strict=True)):
            problem = _pairing_problem(t, src_messages, tr_messages)
            if problem:
                findings.append(self.finding(t, TURN_COUNT, problem))
                continue
            by_code = self.messages(src_messages, tr_messages, names[t])
            missing = [v for v in required[t] if not _occurs(v, _turn_text(tr_messages))]
            if missing and CheckCode.PROTECTED_CHANGED not in by_code:  # else check_translation said it already
                named = ", ".join(repr(v) for v in missing)
                by_code.setdefault(CheckCode.PROTECTED_CHANGED, []).insert(
                    0, f"protected_changed: {named} not verbatim in the turn")
            findings.extend(self.finding(t, code.value, f"turn {t}: " + "; ".join(by_code[code]))
                            for code in CheckCode if code in by_code)
        return findings

    def messages(self, src_messages: Sequence[Mapping[str, Any]], tr_messages: Sequence[Mapping[str, Any]],
                 names: Sequence[str]) -> dict[CheckCode, list[str]]:
        """The problems of one turn's messages (``check_translation`` of each pair not both blank), by code; a
        localized conversation's only those of ``LOCALIZED_CODES``."""
        by_code: dict[CheckCode, list[str]] = {}
        for src, tr in zip(src_messages, tr_messages, strict=True):
            src_text, tr_text = str(src.get("content", "")), str(tr.get("content", ""))
            if not src_text.strip() and not tr_text.strip():
                continue
            check = check_translation(src_text, tr_text, self.source_lang, self.target_lang, names,
                                      back_translator=self.back)
            for code in check.problems:
                if self.protect_from == "target" and code not in LOCALIZED_CODES:
                    continue
                by_code.setdefault(code, []).append(_detail(code, check.details))
        return by_code

    def finding(self, turn: int | None, code: str, message: str) -> ConversationFinding:
        """A finding of this conversation in the target language."""
        return ConversationFinding(self.cid, turn, code, message, self.target_lang, "")


def _pairing_problem(t: int, src_messages: Sequence[Mapping[str, Any]], tr_messages: Sequence[Mapping[str, Any]]
                   ) -> str:
    """Why turn ``t``'s translated messages do not pair with the source's (another count, other roles); ``""``
    when they do."""
    if len(src_messages) != len(tr_messages):
        return f"turn {t}: {len(src_messages)} message(s) in the source, {len(tr_messages)} in the translation"
    roles = [(m.get("role"), n.get("role")) for m, n in zip(src_messages, tr_messages, strict=True)]
    if any(a != b for a, b in roles):
        return (f"turn {t}: the roles of its messages differ ({[a for a, _ in roles]} in the "
                f"source, {[b for _, b in roles]} in the translation)")
    return ""


def _description_findings(source: Conversation, translated: Conversation, source_lang: str,
                          target_lang: str, back_translator: Any = None) -> list[ConversationFinding]:
    """Description checks (``turn=None``); none when the translation kept the source's docs unchanged."""
    src_docs, tr_docs = _all_docs(source), _all_docs(translated)
    src_units, tr_units = template_description_units(src_docs), template_description_units(tr_docs)
    if src_units == tr_units:
        return []
    cid = translated.id
    if [k for k, _ in src_units] != [k for k, _ in tr_units]:
        lost = sorted({k for k, _ in src_units} - {k for k, _ in tr_units})
        extra = sorted({k for k, _ in tr_units} - {k for k, _ in src_units})
        return [ConversationFinding(cid, None, CheckCode.MISSING.value,
                                    f"descriptions: the translation's docs differ from the source's (missing: "
                                    f"{lost[:5]}, not in the source: {extra[:5]})", target_lang)]
    protected = {unit.key: unit.protected for unit in description_units(src_docs)}
    findings: list[ConversationFinding] = []
    for (key, src), (_key, tr) in zip(src_units, tr_units, strict=True):
        if not src.strip():
            continue
        check = check_translation(src, tr, source_lang, target_lang, protected.get(key, ()),
                                  back_translator=back_translator)
        findings.extend(ConversationFinding(cid, None, code.value, f"description {key}: {_detail(code, check.details)}",
                                            target_lang, key) for code in check.problems)
    return findings


def conversation_language(conversation: Conversation, default: str = "en") -> str:
    """The language a conversation is written in: its ``language`` when a record named one, else its category's
    ``:<lang>`` suffix (``mini_mt:de``), else its id's ``_<lang>`` suffix (``mini_mt_3_de``), else ``default``."""
    if conversation.language != "en":
        return conversation.language
    for candidate in (conversation.category.rpartition(":")[2] if ":" in conversation.category else "",
                      conversation.id.rpartition("_")[2] if "_" in conversation.id else ""):
        if candidate and not candidate.isdigit() and language_problem(candidate) is None:
            return candidate
    return default


def template_id(conversation: Conversation, language: str) -> str:
    """The id shared by a conversation's languages: its ``template`` when a record named one, else the id
    without its ``_<language>`` suffix."""
    if conversation.template and conversation.template != conversation.id:
        return conversation.template
    suffix = f"_{language}"
    return conversation.id[:-len(suffix)] if conversation.id.endswith(suffix) else conversation.id


def check_conversation_set(conversations_by_language: Mapping[str, Sequence[Conversation]], *,
                           source_lang: str = "en", protect_from: ProtectFrom = "auto",
                           descriptions: bool = True, back_translator: Any = None
                           ) -> dict[str, list[ConversationFinding]]:
    """Per language other than ``source_lang``, the findings of each conversation against its source.

    Conversations pair by :func:`template_id` (``mini_mt_3_de`` with ``mini_mt_3_en``, a translation's
    ``multi_turn_base_0_de`` with ``multi_turn_base_0``). ``protect_from`` as in
    :func:`check_conversation_translation` (``auto``: per pair), and ``back_translator``. A conversation
    with no source in ``source_lang`` is a ``missing`` finding. Every language asked for has an entry
    (empty: no problem).
    """
    if source_lang not in conversations_by_language:
        raise TranslationError(f"no {source_lang} conversations to compare with (languages given: "
                               f"{', '.join(sorted(conversations_by_language)) or 'none'})")
    sources = {template_id(c, source_lang): c for c in conversations_by_language[source_lang]}
    out: dict[str, list[ConversationFinding]] = {}
    for lang, conversations in conversations_by_language.items():
        if lang == source_lang:
            continue
        findings: list[ConversationFinding] = []
        for conversation in conversations:
            src = sources.get(template_id(conversation, lang))
            if src is None:
                findings.append(ConversationFinding(conversation.id, None, CheckCode.MISSING.value,
                                                    f"no {source_lang} conversation "
                                                    f"{template_id(conversation, lang)!r} to compare with", lang))
                continue
            findings.extend(check_conversation_translation(src, conversation, source_lang, lang,
                                                           protect_from=protect_from, descriptions=descriptions,
                                                           back_translator=back_translator))
        out[lang] = findings
    return out
