"""translate_units end to end: masking, sending, restoring, checking, storing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from promptgrid.errors import MissingTranslationError
from promptgrid.translate import (
    CatalogBackend,
    TargetSummary,
    Unit,
    UnitKind,
    instruction_units,
    segment,
    shipped_catalogs,
    translate_units,
)
from promptgrid.translate._protect import TOKEN_RE


def reviewed_segments(lang: str) -> tuple[dict[str, str], list[Unit]]:
    """English masked segment -> the reviewed translation's segment, renumbered like the English.

    This turns the shipped reviewed catalog into a perfect "machine translator",
    so the test can tell whether the pipeline's cutting, masking and restoring
    preserve a good translation exactly.
    """
    catalog = next(c for c in shipped_catalogs() if c.language == lang and c.kind is UnitKind.INSTRUCTIONS)
    by_source = {e.source: e.text for e in catalog.entries.values()}
    mapping: dict[str, str] = {}
    usable: list[Unit] = []
    for unit in instruction_units():
        english, translated = segment(unit.source).segments, segment(by_source[unit.source]).segments
        if len(english) != len(translated):
            continue
        try:
            pairs = []
            for en, tr in zip(english, translated, strict=True):
                number = {orig: i + 1 for i, orig in enumerate(en.originals)}
                pairs.append((en.text, TOKEN_RE.sub(lambda m, tr=tr, number=number:
                                                    f"⟦{number[tr.originals[int(m.group(1)) - 1]]}⟧", tr.text)))
        except KeyError:
            continue  # the translation protects a span differently; not usable as a fake
        mapping.update(pairs)
        usable.append(unit)
    return mapping, usable


@pytest.mark.parametrize("lang", ["de", "ja", "hi"])
def test_a_perfect_translator_gives_back_the_reviewed_text_and_passes_the_checks(
        lang: str, store: Any, recording: Any) -> None:
    mapping, units = reviewed_segments(lang)
    assert len(units) == len(instruction_units())  # every reviewed string is usable
    backend = recording(lambda text: mapping[text])
    report = translate_units(units, [lang], backend, store)
    catalog = next(c for c in shipped_catalogs() if c.language == lang and c.kind is UnitKind.INSTRUCTIONS)
    expected = {e.source: e.text for e in catalog.entries.values()}
    for result in report.results:
        assert result.ok, (result.unit.key, result.problems, result.details)
        assert result.text == expected[result.unit.source], result.unit.key
    assert len(backend.sent) == len(set(backend.sent))


def test_damaged_spans_are_an_error_recorded_for_that_unit(store: Any, recording: Any) -> None:
    units = [Unit("c.a", UnitKind.INSTRUCTIONS, "Put it in the format of <TOOLCALL>{output_format}</TOOLCALL>."),
             Unit("c.b", UnitKind.INSTRUCTIONS, "Do not include any other text in the response.")]
    translations = {
        "Put it in the format of ⟦1⟧.": "Verwenden Sie das Format ⟦1⟧ ⟦1⟧.",  # duplicated token
        "Do not include any other text in the response.": "Fügen Sie der Antwort keinen weiteren Text hinzu.",
    }
    report = translate_units(units, ["de"], recording(translations.__getitem__), store)
    bad, good = report.results
    assert not bad.ok and "appears 2 times" in " ".join(bad.details["tokens"])
    assert {"placeholder_missing", "tag_missing"} <= set(bad.problems)
    assert good.ok and good.text == "Fügen Sie der Antwort keinen weiteren Text hinzu."
    assert report.summary() == (TargetSummary("de", units=2, translated=2, from_catalog=0, stored=0, missing=0,
                                              failed=1),)
    assert [s for _, s in report.sent] == list(translations)


def test_catalog_backend_reports_missing_units(store: Any) -> None:
    units = [Unit("classic.persona", UnitKind.INSTRUCTIONS, "You are an expert in composing functions."),
             Unit("x.y", UnitKind.INSTRUCTIONS, "A sentence no catalog has.")]
    report = translate_units(units, ["ja"], CatalogBackend(shipped_catalogs()), store)
    found, missing = report.results
    assert found.status == "catalog" and found.ok and found.text
    assert missing.status == "missing" and report.missing == [missing]
    assert store.get("A sentence no catalog has.", "ja", "catalog") is None
    assert report.sent == ()  # a catalog look-up sends nothing anywhere
    assert report.summary() == (TargetSummary("ja", units=2, translated=0, from_catalog=1, stored=0, missing=1,
                                              failed=0),)
    again = translate_units(units, ["ja"], CatalogBackend(shipped_catalogs()), store).summary()[0]
    assert (again.from_catalog, again.stored, again.missing) == (0, 1, 1)


def test_catalog_backend_refuses_a_language_it_has_no_catalog_for(store: Any) -> None:
    units = [Unit("classic.persona", UnitKind.INSTRUCTIONS, "You are an expert in composing functions.")]
    backend = CatalogBackend(shipped_catalogs())
    assert backend.covers("de-DE") and not backend.covers("ko") and "ja" in backend.languages
    with pytest.raises(MissingTranslationError,
                       match="the shipped catalogs have no translations into ko, sv .*they cover: de, es"):
        translate_units(units, ["de", "ko", "sv"], backend, store)
    assert store.get(units[0].source, "de", "catalog") is None  # refused before anything was done


def test_llm_backend_through_the_pipeline_records_everything(store: Any) -> None:
    litellm = pytest.importorskip("litellm")
    from promptgrid.translate._llm import LLMBackend

    mapping, units = reviewed_segments("es")

    def completion(**kwargs: Any) -> Any:
        texts = json.loads(kwargs["messages"][1]["content"])["texts"]
        answer = json.dumps({"translations": [mapping[t] for t in texts]}, ensure_ascii=False)
        return litellm.completion(**kwargs, mock_response=answer)

    backend = LLMBackend("openai/gpt-4o-mini", completion=completion)
    report = translate_units(units, ["es"], backend, store)
    assert all(r.ok for r in report.results), [(r.unit.key, r.problems) for r in report.results if not r.ok]
    stored = store.get(units[0].source, "es", "llm:openai/gpt-4o-mini")
    assert stored is not None and stored.ok and stored.keys == (units[0].key,)
