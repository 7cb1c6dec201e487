"""length_ratio's bands are measured on the shipped catalogs, and every shipped translation passes every check."""

from __future__ import annotations

import collections

import pytest

from promptgrid.translate import check_translation, shipped_catalogs
from promptgrid.translate._check import LANGUAGE_LENGTH_BOUNDS, LENGTH_MEASURED, _content_length, _prose, _strip_spans
from promptgrid.translate._protect import find_spans
from promptgrid.translate._units import UnitKind, instruction_units


def _entries(measured_only: bool = False) -> list[tuple[str, str, str, tuple[str, ...]]]:
    """(language, source, text, protected names) of every shipped catalog entry; ``measured_only``: only the
    catalogs the bands were measured on (the instructions and the ``mini`` descriptions; later catalogs, such as
    ``mini-mt``'s, must pass the bands, not move them)."""
    protected = {u.key: tuple(u.protected) for u in instruction_units()}
    return [(catalog.language, entry.source, entry.text,
             protected.get(key, ()) if catalog.kind is UnitKind.INSTRUCTIONS else ())
            for catalog in shipped_catalogs()
            if not measured_only or catalog.kind is UnitKind.INSTRUCTIONS or catalog.dataset == "mini"
            for key, entry in catalog.entries.items()]


def test_every_shipped_translation_passes_every_check() -> None:
    entries = _entries()
    assert len(entries) >= 8 * 170
    failed = [(lang, source[:40], check_translation(source, text, "en", lang, names).details)
              for lang, source, text, names in entries
              if not check_translation(source, text, "en", lang, names).ok]
    assert failed == []


def test_measured_ratios_are_those_of_the_shipped_catalogs() -> None:
    ratios: dict[str, list[float]] = collections.defaultdict(list)
    for lang, source, text, names in _entries(measured_only=True):
        spans = find_spans(source, names)
        src_len = _content_length(_strip_spans(source, spans))
        if src_len >= 40:  # shorter sources are noisy; the slack judges them
            ratios[lang].append(_content_length(_prose(text, names + tuple(s.text for s in spans))) / src_len)
    assert set(ratios) == set(LENGTH_MEASURED)
    for lang, values in ratios.items():
        values.sort()
        n = len(values)
        measured = (values[int(0.05 * n)], values[n // 2], values[min(n - 1, int(0.95 * n))], values[-1])
        assert measured == pytest.approx(LENGTH_MEASURED[lang], abs=0.011), lang
        low, high, slack = LANGUAGE_LENGTH_BOUNDS[lang]
        assert low < values[0] and values[-1] < high and slack >= 3
