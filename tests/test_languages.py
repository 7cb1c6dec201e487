"""promptgrid.languages: codes, and the one language identifier that scoring and the translation checks share."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from promptgrid import languages
from promptgrid.languages import (
    BROAD_LANGUAGES,
    DEFAULT_LANGUAGES,
    SUPPORTED_LANGUAGES,
    base_language,
    detect_language_match,
    identify_language,
    language_match,
    language_name,
    lookup_languages,
    script_of,
)


def test_codes_and_scripts() -> None:
    assert base_language("de-DE") == "de" and base_language("pt_BR") == "pt"
    assert lookup_languages("de-DE") == ("de-DE", "de")
    assert lookup_languages("zh-TW") == ("zh-TW",)  # Traditional never falls back to Simplified
    assert script_of("ja") == "japanese" and script_of("de") == "latin" and script_of("hi-IN") == "devanagari"
    assert language_name("de") == "German" and language_name("xx") == "xx"


def test_broad_languages_are_every_language_langid_knows() -> None:
    assert list(BROAD_LANGUAGES) == languages._model().classes
    assert {"vi", "nl", "ru", "ko", "sv", "tr"} <= set(BROAD_LANGUAGES)


def test_language_identification_restricted_to_candidates() -> None:
    german = "Leider kann ich diese Frage nicht beantworten, weil keine passende Funktion vorhanden ist."
    english = "I am sorry, but none of the available functions can answer this question."
    assert identify_language(german, ("en", "de", "fr"))[0] == "de"
    assert language_match(german, "de") is True
    assert language_match(english, "de") is False
    assert language_match(english, "en-US") is True  # region subtags are ignored
    assert language_match("   ", "en") is None
    assert detect_language_match(english, "qq") == ("en", None)  # langid does not know "qq"
    with pytest.raises(ValueError, match="known to langid"):
        identify_language(english, ("qq", "xx"))


def _sample_texts() -> list[str]:
    """What both callers identify: mini queries (scoring's case languages) and catalog translations."""
    from promptgrid.matrix.datasets import load_dataset
    from promptgrid.translate import shipped_catalogs

    texts = [case.query for case in load_dataset("mini").cases]
    for catalog in shipped_catalogs():
        texts += [entry.text for entry in catalog.entries.values()][:40]
    return texts + ["ok", "?!", "12345", "Sure! [f(a=1)]", "<functions></functions>", "e\u0301t\u00e9 \U0001F600"]


@pytest.mark.slow
def test_language_identification_agrees_with_langid() -> None:
    """Our use of langid's model (per-state scores) decides exactly as langid.classify does."""
    langid = pytest.importorskip("langid")

    texts = _sample_texts()
    candidate_sets = [DEFAULT_LANGUAGES, ("en", "de"), ("it", "es", "pt", "fr"), ("ja", "zh", "ko"),
                      tuple(sorted({"en", *SUPPORTED_LANGUAGES} - {"ja", "zh", "hi"})),  # the checks' Latin set
                      BROAD_LANGUAGES]  # the checks' second pass
    identifier = langid.langid.LanguageIdentifier.from_modelstring(langid.langid.model, norm_probs=True)
    compared = 0
    for candidates in candidate_sets:
        identifier.set_languages(sorted(candidates))
        for text in texts:
            theirs = identifier.classify(text)
            ours = identify_language(text, candidates)
            assert ours[0] == theirs[0], (text, candidates, ours, theirs)
            assert ours[1] == pytest.approx(theirs[1], rel=1e-6, abs=1e-9), (text, candidates)
            compared += 1
    assert compared >= 6 * 600
    # langid's own classify raises on a lone surrogate (model output can hold one); ours reads it.
    assert identify_language("hello \ud800 world", ("en", "de"))[0] in ("en", "de")


def test_scoring_and_translation_checks_use_this_identifier(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both callers reach ``identify_language``'s one memoized core, with their own candidate sets."""
    from promptgrid.matrix.scoring import score
    from promptgrid.records import Case
    from promptgrid.translate import check_translation, detect_language
    from promptgrid.variants import Variant

    calls: list[tuple[str, frozenset[str]]] = []
    real = languages._identify

    def spy(text: str, candidates: frozenset[str]) -> tuple[str, float]:
        calls.append((text, candidates))
        return real(text, candidates)

    monkeypatch.setattr(languages, "_identify", spy)

    # translation check: Latin-script text goes to the identifier, restricted to plausible Latin languages
    german = "Sie sind ein Experte für das Verfassen von Funktionsaufrufen und Werkzeugen."
    assert detect_language(german, "de") == identify_language(german, ("de", "en", "es", "fr", "it", "pt"))
    calls.clear()
    result = check_translation("You are an expert in composing function calls and tools.", german, "en", "de")
    assert result.ok, result.details
    # first among the plausible languages, then (a second pass) against every language langid knows
    assert calls and calls[0][1] == frozenset({"de", "en", "es", "fr", "it", "pt"})
    assert {c[1] for c in calls} == {frozenset({"de", "en", "es", "fr", "it", "pt"}), frozenset(BROAD_LANGUAGES)}

    # scoring: a free-text answer where no call was expected gets its language from the same identifier
    calls.clear()
    function = {"name": "weather.get", "description": "Weather of a city.",
                "parameters": {"type": "dict", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
    case = Case("irrelevance_0", "irrelevance", ({"role": "user", "content": "Wie spät ist es?"},),
                (function,), language="de")
    verdict = score("Leider kann ich diese Frage mit keiner der Funktionen beantworten.", Variant(), case)
    assert verdict.valid and verdict.response_language == "de" and verdict.language_match is True
    assert [c[1] for c in calls] == [frozenset(DEFAULT_LANGUAGES)]


def test_import_is_lazy() -> None:
    """``import promptgrid.languages`` loads neither langid nor numpy (langid's import alone takes ~0.2 s)."""
    code = ("import sys, promptgrid.languages, promptgrid.translate; "
            "print(sorted(m for m in ('langid', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_decoded_model_is_cached_and_read_back_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from promptgrid import languages

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    decoded = languages._LangidModel()  # from langid's own string; kept in the cache
    (cached_file,) = (tmp_path / "promptgrid").glob("langid-*.npz")
    again = languages._LangidModel()  # from the cache
    assert again.classes == decoded.classes and list(again.nextmove) == list(decoded.nextmove)
    assert again.output == {k: tuple(v) for k, v in decoded.output.items()}
    langs = ("de", "en", "hi", "ja", "zh")
    texts = ("Das ist ein schöner Tag.", "The weather is nice today.", "यह एक वाक्य है", "これは文です", "这是一个句子")
    for text in texts:
        assert again.classify(text, langs) == decoded.classify(text, langs)
    cached_file.write_bytes(b"not a numpy archive")  # damage: decoded again, never an error
    assert languages._LangidModel().classes == decoded.classes
