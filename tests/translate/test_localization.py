"""Localization precedence, and the MASSIVE-Agents translation ablation rendered offline."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

import pytest

from promptgrid.translate import (
    CatalogEntry,
    CatalogLocalization,
    TranslationCatalog,
    TranslationError,
    TranslationStore,
    UnitKind,
    default_localization,
    english_catalog,
)


def catalog(lang: str, entries: dict[str, tuple[str, str]], reviewed: bool = True,
            kind: UnitKind = UnitKind.INSTRUCTIONS) -> TranslationCatalog:
    return TranslationCatalog(f"{lang}.yaml", lang, kind, reviewed,
                   {k: CatalogEntry(k, s, t) for k, (s, t) in entries.items()})


def test_precedence_override_then_reviewed_then_store_then_unreviewed(store: TranslationStore) -> None:
    reviewed = catalog("de", {"c.a": ("A", "A-reviewed")})
    unreviewed = catalog("de", {"c.a": ("A", "A-draft"), "c.b": ("B", "B-draft"), "c.c": ("C", "C-draft")},
                         reviewed=False)
    store.put("A", "de", "amazon", "A-machine", ok=True)
    store.put("B", "de", "amazon", "B-machine", ok=True)
    store.put("C", "de", "amazon", "C-bad", ok=False, problems=["untranslated"])
    loc = CatalogLocalization([reviewed, unreviewed], store)
    assert loc.instruction("A", "de", "c.a") == "A-reviewed"
    assert loc.instruction("B", "de", "c.b") == "B-machine"
    assert loc.instruction("C", "de", "c.c") == "C-draft"  # the failed machine translation is never used
    assert loc.instruction("D", "de", "c.d") is None
    store.set_override("A", "de", "A-override")
    assert loc.instruction("A", "de", "c.a") == "A-override"
    assert loc.instruction("A", "en", "c.a") == "A"


def test_lookup_is_by_source_text_so_stale_entries_are_never_used() -> None:
    loc = CatalogLocalization([catalog("de", {"c.a": ("Old English", "Altes Deutsch")})])
    assert loc.instruction("New English", "de", "c.a") is None
    assert loc.instruction("Old English", "de", "another.key") == "Altes Deutsch"


def test_descriptions_and_instructions_are_separate() -> None:
    loc = CatalogLocalization([catalog("ja", {"f.description": ("City", "都市")}, kind=UnitKind.DESCRIPTIONS)])
    assert loc.description("City", "ja", "f.description") == "都市"
    assert loc.instruction("City", "ja", "f.description") is None


def test_a_named_store_must_exist(tmp_path: Path) -> None:
    with pytest.raises(TranslationError, match="does not exist"):
        default_localization(tmp_path / "missing.sqlite3")
    loc = default_localization()  # the default store may be absent: shipped catalogs only
    assert loc.instruction("You are an expert in composing functions.", "de", "classic.persona")


# --------------------------------------------------------------------------- the ablation on mini

LANGUAGES = ("it", "de", "es", "ja", "hi", "zh")


@pytest.fixture(scope="module")
def ablation() -> dict[tuple[str, str], dict[str, str]]:
    """case id -> {english, partial, full} system text, rendered with no network and no store."""
    templates = pytest.importorskip("promptgrid.templates")
    datasets = pytest.importorskip("promptgrid.matrix.datasets")
    from promptgrid.variants import load_grid

    grid = load_grid("massive_translation")
    dataset = datasets.load_dataset("mini:" + ",".join(LANGUAGES))
    renderer = templates.Renderer(localization=default_localization())
    names = {
        (v.instruction_language, v.description_language): name
        for v, name in zip(grid.variants, ("english", "partial", "full"), strict=True)
    }
    assert set(names) == {("en", "en"), ("en", "query"), ("query", "query")}
    out: dict[Any, dict[str, str]] = {}
    for case in dataset.cases:
        out[(case.id, case.language)] = {
            names[(v.instruction_language, v.description_language)]:
                "\n".join(m["content"] for m in renderer.render(v, case).messages)
            for v in grid.variants
        }
    return out


def test_every_language_of_the_ablation_renders(ablation: dict[Any, dict[str, str]]) -> None:
    assert {lang for _, lang in ablation} == set(LANGUAGES)
    assert len(ablation) >= 6 * 10


def test_partial_prompts_change_only_descriptions(ablation: dict[Any, dict[str, str]]) -> None:
    for (case_id, _lang), prompts in ablation.items():
        english, partial = prompts["english"].splitlines(), prompts["partial"].splitlines()
        assert len(english) == len(partial), case_id
        changed = [(a, b) for a, b in zip(english, partial, strict=True) if a != b]
        assert changed, f"{case_id}: no description was translated"
        for before, after in changed:
            assert before.lstrip().startswith('"description": '), (case_id, before)
            assert after.lstrip().startswith('"description": '), (case_id, after)
        opcodes = difflib.SequenceMatcher(a=english, b=partial, autojunk=False).get_opcodes()
        assert all(tag in ("equal", "replace") for tag, *_ in opcodes), case_id


def _sentences(text: str) -> list[str]:
    out = []
    for line in text.split("\n"):
        line = re.sub(r"^\s*-\s+", "", line)
        out.extend(s.strip() for s in re.split(r"(?<=[.!?:])\s+", line) if s.strip())
    return out


def test_full_prompts_keep_no_english_instruction_sentence(ablation: dict[Any, dict[str, str]]) -> None:
    english_sentences = [s for text in english_catalog("massive_one_shot").values() for s in _sentences(text)]
    # A one-word label may legitimately stay the same (German "Bot"); every real sentence must go.
    checked = [s for s in english_sentences if len(s.split()) >= 2]
    assert len(checked) >= 10
    for (case_id, _lang), prompts in ablation.items():
        assert prompts["full"] != prompts["partial"]
        for sentence in checked:
            assert sentence not in prompts["full"], (case_id, sentence)
            assert sentence in prompts["partial"] or sentence.rstrip(":") in prompts["partial"]
