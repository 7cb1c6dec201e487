"""Translations too short for langid (under 20 letters) are judged by their letters and function words: a
Vietnamese, Spanish or Dutch sentence fails for German; right short translations, and every short piece of the
shipped reviewed catalogs, pass."""

from __future__ import annotations

import pytest

from promptgrid.translate._catalogs import shipped_catalogs
from promptgrid.translate._check import MIN_BROAD_LETTERS, CheckCode, _script_counts, check_translation

SOURCE = "Book a table."
RIGHT = {"de": "Einen Tisch buchen.", "es": "Reserva una mesa.", "fr": "Réservez une table.",
         "it": "Prenota un tavolo.", "pt": "Reserve uma mesa.", "nl": "Een tafel boeken."}
OTHER = {"vi": "Đặt một bàn.", "tr": "Bir masa ayırt.", **RIGHT}


@pytest.mark.parametrize("target", sorted(RIGHT))
def test_a_right_short_translation_passes(target: str) -> None:
    result = check_translation(SOURCE, RIGHT[target], "en", target)
    assert result.ok, result.details


@pytest.mark.parametrize(("written", "target"), [
    ("vi", "de"), ("vi", "fr"), ("vi", "es"), ("tr", "de"), ("es", "de"), ("fr", "de"), ("nl", "de"),
    ("it", "de"), ("pt", "de"), ("de", "es"), ("de", "fr"), ("nl", "it"),
])
def test_a_short_sentence_in_another_language_fails(written: str, target: str) -> None:
    text = OTHER[written]
    assert sum(_script_counts(text).values()) < MIN_BROAD_LETTERS  # too short for the langid checks
    result = check_translation(SOURCE, text, "en", target)
    assert result.problems == [CheckCode.WRONG_LANGUAGE], result.details
    assert "a short text with" in result.details["wrong_language"]


def test_names_kept_from_the_source_and_loanwords_are_not_foreign() -> None:
    assert check_translation("Open the Café Đông.", "Café Đông öffnen.", "en", "de").ok
    assert check_translation("Send an email.", "E-Mail senden.", "en", "de").ok
    assert check_translation("Weather in Berlin.", "Wetter in Berlin.", "en", "de").ok


def test_no_short_piece_of_a_reviewed_catalog_fails_the_short_check() -> None:
    """Every one-, two- and three-word piece of every shipped translation: reviewed text, so none may fail.

    Protected spans (names, codes, BFCL's ``[Enum]: ...`` value lists) are left out of the pieces: they are the
    source's, kept verbatim, not the language's text."""
    from promptgrid.translate._check import _strip_spans
    from promptgrid.translate._protect import find_spans

    checked, failed = 0, []
    for catalog in shipped_catalogs():
        if catalog.language not in RIGHT:
            continue
        for entry in catalog.entries.values():
            text = entry.text or ""
            words = _strip_spans(text, find_spans(text)).split()
            for size in (1, 2, 3):
                for i in range(0, len(words), size):
                    piece = " ".join(words[i:i + size])
                    if not 4 <= sum(_script_counts(piece).values()) < MIN_BROAD_LETTERS:
                        continue
                    checked += 1
                    result = check_translation(entry.source, piece, "en", catalog.language)
                    if CheckCode.WRONG_LANGUAGE in result.problems:
                        failed.append((catalog.language, piece, result.details["wrong_language"]))
    assert checked > 5000 and failed == []
