"""Translate units with a backend: each unique string once, checked, stored.

For each target language:

1. units are grouped by source text; a source already in the store for this
   (target, backend) is *cached* and costs nothing;
2. each new source is cut into segments: fenced code blocks and lines with
   nothing to translate are kept as they are; every other line loses its
   indentation, markdown marker (``## ``, ``- ``, ``1. ``) and surrounding
   spaces (kept aside, so the line structure cannot break) and has its
   protected spans masked (:mod:`._protect`);
3. the unique masked segments are sent to the backend in batches;
4. each source is reassembled, its tokens verified and restored, and the
   result checked (:func:`check_translation`); a damaged token is recorded as
   ``protected_changed`` for that unit;
5. the translation is stored with its check result, whatever it is. Failed
   ones stay flagged and are never used for rendering.

Catalog backends (``masks = False``) translate whole strings; their entries
are looked up, checked and stored the same way (user catalogs as overrides).
A catalog backend with no entry at all for a requested language raises
:class:`~promptgrid.errors.MissingTranslationError` before anything is done;
otherwise the report says, per language, what was translated by the backend,
taken from a catalog, already stored, or is missing (:meth:`TranslateReport.summary`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from promptgrid.errors import MissingTranslationError, TranslationError

from ._backends import TranslationBackend
from ._check import CheckCode, TranslationCheck
from ._memo import memo
from ._protect import Masked, mask, unmask
from ._store import TranslationStore
from ._units import Unit

__all__ = ["LanguageSummary", "Segmented", "TargetSummary", "TranslateReport", "UnitResult", "segment",
           "translate_units"]

_FENCE_RE = re.compile(r"```.*?```", re.S)
_PREFIX_RE = re.compile(r"^(\s*(?:#{1,6}\s+|[-*+•]\s+|\d+[.)]\s+|>\s*)?)(.*?)(\s*)$", re.S)


@dataclass(frozen=True)
class Segmented:
    """A source string as literal pieces and masked segments, in order."""

    pieces: tuple[str | Masked, ...]

    @property
    def segments(self) -> tuple[Masked, ...]:
        return tuple(p for p in self.pieces if isinstance(p, Masked))

    def assemble(self, translations: dict[str, str]) -> tuple[str, list[str]]:
        """The translated string from the segments' translations, and token problems."""
        out: list[str] = []
        problems: list[str] = []
        for piece in self.pieces:
            if isinstance(piece, Masked):
                restored, issues = unmask(translations[piece.text].strip(), piece)
                out.append(restored)
                problems.extend(issues)
            else:
                out.append(piece)
        return "".join(out), problems


def segment(text: str, names: Iterable[str] = ()) -> Segmented:
    """Cut ``text`` into literal pieces and masked segments to translate (see module docstring)."""
    names = tuple(names)
    pieces: list[str | Masked] = []
    pos = 0
    blocks = [(m.start(), m.end()) for m in _FENCE_RE.finditer(text)]
    for start, end in [*blocks, (len(text), len(text))]:
        prose = text[pos:start]
        for i, line in enumerate(prose.split("\n")):
            if i:
                pieces.append("\n")
            m = _PREFIX_RE.match(line)
            assert m is not None
            prefix, core, trail = m.groups()
            masked = mask(core, names) if core else None
            if masked is None or not masked.has_prose:
                pieces.append(line)
                continue
            pieces.extend(x for x in (prefix, masked, trail) if x != "")
        pieces.append(text[start:end])
        pos = end
    merged: list[str | Masked] = []
    for piece in pieces:
        if isinstance(piece, str) and merged and isinstance(merged[-1], str):
            merged[-1] += piece
        elif piece != "":
            merged.append(piece)
    return Segmented(tuple(merged))


@dataclass(frozen=True)
class UnitResult:
    """What happened to one unit in one target language.

    ``status``: ``new`` (translated now by a machine backend), ``catalog``
    (taken now from a catalog), ``cached`` (already in the store) or
    ``missing`` (a catalog backend has no entry).
    """

    unit: Unit
    target: str
    status: str
    text: str | None = None
    ok: bool = False
    problems: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TargetSummary:
    """Counts of units for one target language of a :func:`translate_units` call.

    ``translated``: by the backend now; ``from_catalog``: taken from a catalog now;
    ``stored``: already in the store (nothing done); ``missing``: no translation
    anywhere; ``failed``: translated or stored but flagged by the checks (not used).
    """

    language: str
    units: int
    translated: int
    from_catalog: int
    stored: int
    missing: int
    failed: int


LanguageSummary = TargetSummary
"""The former name of ``TargetSummary``, an alias kept for code that imports it (a report's
``promptgrid.matrix.report.LanguageSummary`` is the record named ``LanguageSummary``)."""


@dataclass(frozen=True)
class TranslateReport:
    """All unit results of one ``translate_units`` call, and the (target, text) pairs sent to a machine backend."""

    backend: str
    results: tuple[UnitResult, ...]
    sent: tuple[tuple[str, str], ...] = ()

    def summary(self) -> tuple[TargetSummary, ...]:
        """What happened per target language, in the order asked for."""
        out = []
        for target in dict.fromkeys(r.target for r in self.results):
            mine = [r for r in self.results if r.target == target]
            count = Counter(r.status for r in mine)
            out.append(TargetSummary(target, len(mine), count["new"], count["catalog"], count["cached"],
                                       count["missing"], sum(r.status != "missing" and not r.ok for r in mine)))
        return tuple(out)

    @property
    def failed(self) -> list[UnitResult]:
        return [r for r in self.results if r.status != "missing" and not r.ok]

    @property
    def missing(self) -> list[UnitResult]:
        return [r for r in self.results if r.status == "missing"]


def translate_units(
    units: Sequence[Unit],
    targets: Sequence[str],
    backend: TranslationBackend,
    store: TranslationStore,
    *,
    source_lang: str = "en",
    batch_size: int = 50,
    checker: Callable[..., TranslationCheck] | None = None,
    progress: Callable[[str], None] | None = None,
) -> TranslateReport:
    """Translate ``units`` into each target; see the module docstring. ``checker``: ``check_translation``'s
    signature (default: it, its results kept between commands by :mod:`._memo`)."""
    kept = None
    if checker is None:
        kept = memo()
        checker = kept.check
    try:
        return _translate_units(units, targets, backend, store, source_lang=source_lang, batch_size=batch_size,
                                checker=checker, progress=progress)
    finally:
        if kept is not None:
            kept.flush()


_Outcome = tuple[str, str | None, bool, tuple[str, ...], dict[str, Any]]
"""What happened to one source in one target: ``UnitResult``'s fields from ``status`` on."""


@dataclass(frozen=True)
class _Context:
    """What every step of one ``translate_units`` call shares."""

    backend: TranslationBackend
    store: TranslationStore
    source_lang: str
    checker: Callable[..., TranslationCheck]
    override: bool
    """Whether the backend writes overrides (user catalogs) rather than machine translations."""


def _translate_units(units: Sequence[Unit], targets: Sequence[str], backend: TranslationBackend,
                     store: TranslationStore, *, source_lang: str, batch_size: int,
                     checker: Callable[..., TranslationCheck], progress: Callable[[str], None] | None
                     ) -> TranslateReport:
    results: list[UnitResult] = []
    sent: list[tuple[str, str]] = []
    by_source: dict[str, list[Unit]] = {}
    for unit in units:
        by_source.setdefault(unit.source, []).append(unit)
    ctx = _Context(backend, store, source_lang, checker, bool(getattr(backend, "override", False)))
    _require_coverage(backend, targets)
    for target in targets:
        done, todo = _from_store(ctx, by_source, target)
        if getattr(backend, "masks", True):
            fresh = _translate_masked(todo, by_source, target, backend, source_lang, batch_size, sent)
        else:
            fresh = _translate_whole(todo, by_source, target, backend, sent)
        for source, (text, token_problems) in fresh.items():
            done[source] = _check_and_store(ctx, source, by_source[source], target, text, token_problems)
        for unit in units:
            outcome = done[unit.source]
            results.append(UnitResult(unit, target, *outcome))
        if progress:
            progress(target)
    return TranslateReport(backend.name, tuple(results), tuple(sent))


def _from_store(ctx: _Context, by_source: dict[str, list[Unit]], target: str
                ) -> tuple[dict[str, _Outcome], list[str]]:
    """The sources already stored for ``target`` (their keys added to the row), and the sources still to do."""
    backend, store = ctx.backend, ctx.store
    done: dict[str, _Outcome] = {}
    todo: list[str] = []
    for source, group in by_source.items():
        keys = [u.key for u in group]
        stored = store.get_override(source, target) if ctx.override else store.get(source, target, backend.name)
        if stored is not None and (not ctx.override or _same_override(stored.text, backend, source, target)):
            if not ctx.override:
                store.add_keys(source, target, backend.name, keys)
            done[source] = ("cached", stored.text, stored.ok, stored.problems, dict(stored.details))
        else:
            todo.append(source)
    return done, todo


def _check_and_store(ctx: _Context, source: str, group: Sequence[Unit], target: str, text: str | None,
                     token_problems: list[str]) -> _Outcome:
    """Check a fresh translation of ``source`` and store it with its result, whatever it is; ``missing``
    when the backend had none."""
    if text is None:
        return ("missing", None, False, (), {})
    protected = _protected(group)
    check = ctx.checker(source, text, ctx.source_lang, target, protected)
    problems = [p.value if isinstance(p, CheckCode) else str(p) for p in check.problems]
    details = dict(check.details)
    if protected:
        # Kept so that ``check-translations`` can re-check with the same names.
        details["protected"] = list(protected)
    if token_problems:
        details["tokens"] = token_problems
        if not problems:
            problems.append(CheckCode.PROTECTED_CHANGED.value)
    ok = not problems
    keys = [u.key for u in group]
    kind = group[0].kind.value
    if ctx.override:
        ctx.store.set_override(source, target, text, ok=ok, problems=problems, details=details, kind=kind,
                               keys=keys, origin=ctx.backend.name)
    else:
        ctx.store.put(source, target, ctx.backend.name, text, ok=ok, problems=problems, details=details,
                      kind=kind, keys=keys)
    status = "catalog" if getattr(ctx.backend, "lookup", None) is not None else "new"
    return (status, text, ok, tuple(problems), details)


def _require_coverage(backend: TranslationBackend, targets: Sequence[str]) -> None:
    """A catalog backend must have entries for every target: otherwise nothing could be translated."""
    covers = getattr(backend, "covers", None)
    if covers is None:
        return
    uncovered = [t for t in targets if not covers(t)]
    if uncovered:
        have = ", ".join(getattr(backend, "languages", ())) or "none"
        describe = getattr(backend, "describe", None)
        what = describe() if callable(describe) else f"the {backend.name} catalogs"
        raise MissingTranslationError(
            f"{what} have no translations into {', '.join(uncovered)} "
            f"(they cover: {have}); translate with a machine backend (--backend amazon or "
            f"--backend llm:MODEL, e.g. llm:openai/gpt-4o-mini) or write a catalog file and pass "
            f"--backend catalog:PATH (format: translate/catalogs/de.yaml)")


def _protected(group: Sequence[Unit]) -> tuple[str, ...]:
    """Names to keep for a source shared by several units (each may name its own function)."""
    return tuple(dict.fromkeys(name for unit in group for name in unit.protected))


def _same_override(text: str, backend: TranslationBackend, source: str, target: str) -> bool:
    lookup = getattr(backend, "lookup", None)
    return lookup is None or lookup(source, target) == text


def send_batches(texts: Sequence[str], backend: TranslationBackend, source_lang: str, target: str, *,
                 batch_size: int = 50, on_batch: Callable[[list[str], list[str]], None] | None = None
                 ) -> dict[str, str]:
    """Each of ``texts`` translated, ``batch_size`` per backend call; ``on_batch(sources, translations)`` after
    each call (to keep what came back before the next one is sent). Raises ``TranslationError`` when the
    backend answers with another number of texts, or with something that is not a string."""
    done: dict[str, str] = {}
    for i in range(0, len(texts), batch_size):
        batch = list(texts[i:i + batch_size])
        out = backend.translate(batch, source_lang, target)
        if not isinstance(out, list) or len(out) != len(batch) or not all(isinstance(t, str) for t in out):
            got = len(out) if isinstance(out, list) else type(out).__name__
            raise TranslationError(f"backend {backend.name} returned {got} texts for {len(batch)}")
        done.update(zip(batch, out, strict=True))
        if on_batch is not None:
            on_batch(batch, out)
    return done


def _translate_masked(todo: list[str], by_source: dict[str, list[Unit]], target: str,
                      backend: TranslationBackend, source_lang: str, batch_size: int,
                      sent: list[tuple[str, str]]) -> dict[str, tuple[str | None, list[str]]]:
    segmented = {source: segment(source, _protected(by_source[source])) for source in todo}
    unique = list(dict.fromkeys(seg.text for s in segmented.values() for seg in s.segments))
    translations = send_batches(unique, backend, source_lang, target, batch_size=batch_size,
                                on_batch=lambda batch, _out: sent.extend((target, text) for text in batch))
    return {source: seg.assemble(translations) for source, seg in segmented.items()}


def _translate_whole(todo: list[str], by_source: dict[str, list[Unit]], target: str,
                     backend: TranslationBackend, sent: list[tuple[str, str]]
                     ) -> dict[str, tuple[str | None, list[str]]]:
    lookup = getattr(backend, "lookup", None)
    out: dict[str, tuple[str | None, list[str]]] = {}
    for source in todo:
        if lookup is not None:  # a catalog look-up: nothing is sent anywhere
            out[source] = (lookup(source, target, by_source[source][0].key), [])
        else:
            sent.append((target, source))
            out[source] = (backend.translate([source], "en", target)[0], [])
    return out
