"""Localization: what is looked up (and with which keys), what never is, and the missing-translation error."""

from __future__ import annotations

from collections import Counter

import pytest

from promptgrid.errors import MissingTranslationError
from promptgrid.records import Case
from promptgrid.templates import Localization, Renderer, description_units
from promptgrid.variants import Variant, load_grid
from support.builders import make_case


class FakeLocalization:
    """Prefixes every unit with ``[lang]``; ``missing`` keys return None. Counts lookups."""

    def __init__(self, missing: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.missing = missing
        self.calls: Counter[tuple[str, str, str]] = Counter()

    def instruction(self, source: str, lang: str, key: str) -> str | None:
        self.calls["instruction", lang, key] += 1
        return None if key in self.missing else f"[{lang}] {source}"

    def description(self, source: str, lang: str, key: str) -> str | None:
        self.calls["description", lang, key] += 1
        return None if key in self.missing else f"[{lang}] {source}"


NESTED = {
    "name": "trip.plan",
    "description": "Plan a trip.",
    "parameters": {"type": "dict", "properties": {
        "dest": {"type": "string", "description": "Where to.", "enum": ["Rome", "Oslo"], "default": "Rome"},
        "prefs": {"type": "dict", "description": "Preferences.", "properties": {
            "budget": {"type": "integer", "description": "Budget in EUR."}}},
        "stops": {"type": "array", "description": "Stops.", "items": {"type": "dict", "properties": {
            "city": {"type": "string", "description": "Stop city."}}}},
    }, "required": ["dest"]},
}


def test_fake_satisfies_protocol() -> None:
    assert isinstance(FakeLocalization(), Localization)


def test_description_units_keys() -> None:
    assert description_units([NESTED]) == [
        ("trip.plan.description", "Plan a trip."),
        ("trip.plan.dest", "Where to."),
        ("trip.plan.prefs", "Preferences."),
        ("trip.plan.prefs.budget", "Budget in EUR."),
        ("trip.plan.stops", "Stops."),
        ("trip.plan.stops[].city", "Stop city."),
    ]


@pytest.mark.parametrize("doc", ["json", "python", "xml"])
def test_full_translation(doc: str) -> None:
    loc = FakeLocalization()
    case = make_case([NESTED], language="de")
    variant = Variant(doc_format=doc, return_format="verbose_xml", tool_call_tag=True,
                      instruction_language="de", description_language="de")
    system = Renderer(localization=loc).render(variant, case).messages[0]["content"]
    assert system.startswith("[de] You are an expert in composing functions.[de] You are given")
    assert "[de] Plan a trip." in system and "[de] Where to." in system and "[de] Budget in EUR." in system
    assert "[de] The type fields of the parameters" in system
    # never localized: names, enum values, defaults, output-format example, tags
    assert "trip.plan" in system and ("'Rome'" in system or '"Rome"' in system)
    assert "[de] trip.plan" not in system and "[de] Rome" not in system
    assert '<TOOLCALL><functions><function name="func_name1">' in system
    keys = {k for (_kind, _lang, k) in loc.calls}
    assert "classic.persona" in keys and "classic.heading_task" in keys
    assert "trip.plan.stops[].city" in keys


def test_partial_translation_uses_query_language() -> None:
    loc = FakeLocalization()
    case = make_case([NESTED], language="ja")
    prompt = Renderer(localization=loc).render(Variant(description_language="query"), case)
    system = prompt.messages[0]["content"]
    assert system.startswith("You are an expert in composing functions.")
    assert "[ja] Plan a trip." in system
    assert {kind for kind, _, _ in loc.calls} == {"description"}
    assert prompt.variant_id.endswith("&desc_lang=query")


def test_english_and_regional_english_need_no_localization() -> None:
    case = make_case([NESTED], language="en-US")
    r = Renderer()  # no localization at all
    r.render(Variant(instruction_language="query", description_language="query"), case)
    r.render(Variant(instruction_language="en", description_language="en"), case)


def test_missing_units_are_all_listed() -> None:
    loc = FakeLocalization(missing={"classic.task", "trip.plan.prefs.budget", "trip.plan.description"})
    case = make_case([NESTED], language="de")
    variant = Variant(instruction_language="de", description_language="de")
    with pytest.raises(MissingTranslationError) as info:
        Renderer(localization=loc).render(variant, case)
    msg = str(info.value)
    assert "3 translation(s) missing for language 'de'" in msg
    assert "classic.task" in msg and "trip.plan.prefs.budget" in msg and "trip.plan.description" in msg
    assert "promptgrid translate --to de" in msg
    assert "case_1" in msg and variant.id in msg


def test_no_localization_means_everything_missing() -> None:
    case = make_case([NESTED], language="hi")
    with pytest.raises(MissingTranslationError) as info:
        Renderer().render(Variant(template="massive_one_shot", instruction_language="query",
                                  description_language="query"), case)
    msg = str(info.value)
    assert "'hi'" in msg and "massive_one_shot.intro" in msg and "more)" in msg
    assert "--what instructions" in msg and "--what descriptions" in msg


def test_lookups_are_cached_across_variants() -> None:
    loc = FakeLocalization()
    case = make_case([NESTED], language="de")
    renderer = Renderer(localization=loc)
    for variant in load_grid("bfcl_v4_full").variants:
        renderer.render(Variant(**{**variant.dimensions(), "instruction_language": "de",
                                   "description_language": "de"}), case)
    assert max(loc.calls.values()) <= 3  # each unit asked once per (catalog, language) / per doc format


def test_translated_massive_prompt() -> None:
    loc = FakeLocalization()
    case = make_case([NESTED], language="es", turns=[{"role": "user", "content": "Planifica un viaje"}])
    grid = load_grid("massive_translation")
    full = Renderer(localization=loc).render(grid.variants[2], case).messages
    assert len(full) == 1 and full[0]["role"] == "user"
    text = full[0]["content"]
    assert text.startswith("[es] A chat between") and "[es] Plan a trip." in text
    assert text.endswith("[es] User: Planifica un viaje [es] Bot:")
    assert 'Action: alarm.set(time="nine am", date="this week")' in text  # code is never translated


def test_localized_catalog_keeps_placeholders_filled() -> None:
    class Swap:
        def instruction(self, source: str, lang: str, key: str) -> str | None:
            return {"classic.available_tools": "Funktionen ({format}):\n{functions}\n"}.get(key, source)

        def description(self, source: str, lang: str, key: str) -> str | None:
            return source

    case: Case = make_case()
    system = Renderer(localization=Swap()).render(Variant(instruction_language="de"), case).messages[0]["content"]
    assert "Funktionen (json):\n[\n" in system
