"""The shipped reviewed catalogs and the translation-check corpus, checked for content.

These tests guard the *data* (translate/catalogs/**, tests/translate/corpus/**):
every English string has a translation whose ``source`` is still the English
byte for byte, nothing that must stay verbatim was translated, and the corpus
is well-formed and covers every problem code. They read files only (YAML,
JSON), so a drift in templates/catalogs/ or mini_functions.json fails here with
the key to re-translate.
"""

from __future__ import annotations

import collections
import json
import re
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

LANGUAGES = ("it", "de", "es", "ja", "hi", "zh", "fr", "pt")
ENGLISH_CATALOGS = ("classic", "experimental", "bfcl_v1_zero_shot", "massive_one_shot")
CODES = {"placeholder_missing", "tag_missing", "markup_changed", "protected_changed", "wrong_language",
         "untranslated", "length_ratio", "structure_changed"}
CORPUS = Path(__file__).parent / "corpus"

PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*\}")
TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9_]*>")
# Loaders are cached (read once per session); callers never mutate what they return.
# Things a description or instruction must keep verbatim when its source has them.
VERBATIM = re.compile(r"'[^'\s]+'|YYYY-MM-DD|HH:MM|ISO 4217|\b[a-z]+_[a-z_]+\b|\btrue\b|\d+(?:\.\d+)?"
                      r"|Action: ActionOne\(\)|```|\b(?:string|integer|float|boolean|array|dict|tuple)\b")


def _read(package: str, *parts: str) -> str:
    return resources.files(package).joinpath(*parts).read_text(encoding="utf-8")


@cache
def _english_instructions() -> dict[str, str]:
    out = {}
    for name in ENGLISH_CATALOGS:
        data = yaml.safe_load(_read("promptgrid.templates", "catalogs", f"{name}.yaml"))
        out.update({f"{name}.{key}": value for key, value in data.items()})
    return out


def _walk(prefix: str, properties: dict[str, Any], out: dict[str, str]) -> None:
    for name, schema in properties.items():
        if isinstance(schema.get("description"), str):
            out[f"{prefix}.{name}"] = schema["description"]
        children = schema.get("properties") or (schema.get("items") or {}).get("properties")
        if isinstance(children, dict):
            _walk(f"{prefix}.{name}", children, out)


@cache
def _english_descriptions() -> dict[str, str]:
    functions = json.loads(_read("promptgrid.matrix.datasets", "data", "mini_functions.json"))
    out: dict[str, str] = {}
    for function in functions:
        out[f"{function['name']}.description"] = function["description"]
        _walk(function["name"], function["parameters"].get("properties", {}), out)
    return out


@cache
def _catalog(lang: str, kind: str) -> dict[str, Any]:
    parts = (("catalogs", f"{lang}.yaml") if kind == "instructions"
             else ("catalogs", "descriptions", "mini", f"{lang}.yaml"))
    return yaml.safe_load(_read("promptgrid.translate", *parts))


@pytest.mark.parametrize("kind", ["instructions", "descriptions"])
@pytest.mark.parametrize("lang", LANGUAGES)
def test_catalog_covers_every_english_string_exactly(lang: str, kind: str) -> None:
    english = _english_instructions() if kind == "instructions" else _english_descriptions()
    data = _catalog(lang, kind)
    assert data["language"] == lang and data["kind"] == kind and data["reviewed"] is True
    units = data["units"]
    assert sorted(set(english) - set(units)) == [], "English strings with no translation"
    assert sorted(set(units) - set(english)) == [], "units whose key is gone from the English"
    stale = [key for key, unit in units.items() if unit["source"] != english[key]]
    assert stale == [], "stale units: the English changed, re-translate and re-review them"


@pytest.mark.parametrize("kind", ["instructions", "descriptions"])
@pytest.mark.parametrize("lang", LANGUAGES)
def test_translations_keep_what_must_stay_verbatim(lang: str, kind: str) -> None:
    for key, unit in _catalog(lang, kind)["units"].items():
        source, text = unit["source"], unit["text"]
        assert text.strip(), key
        assert sorted(PLACEHOLDER.findall(source)) == sorted(PLACEHOLDER.findall(text)), key
        assert sorted(TAG.findall(source)) == sorted(TAG.findall(text)), key
        assert source.count("\n") == text.count("\n"), f"{key}: line structure"
        assert source.endswith("\n") == text.endswith("\n"), f"{key}: trailing newline"
        assert [line.startswith("- ") for line in source.split("\n")] == \
            [line.startswith("- ") for line in text.split("\n")], f"{key}: bullets"
        for token in VERBATIM.findall(source):
            assert token in text, f"{key}: {token!r} must stay as it is"


_KANA = re.compile(r"[\u3040-\u30ff]")
_HAN = re.compile(r"[\u4e00-\u9fff]")
_DEVANAGARI = re.compile(r"[\u0900-\u097f]")


@pytest.mark.parametrize("kind", ["instructions", "descriptions"])
@pytest.mark.parametrize("lang", LANGUAGES)
def test_script_and_register(lang: str, kind: str) -> None:
    """Each language in its own script, one register throughout (see docs/catalogs.md)."""
    units = _catalog(lang, kind)["units"]
    if lang == "ja":  # short noun phrases may be all kanji ("借入額。"), sentences have kana
        assert sum(bool(_KANA.search(u["text"])) for u in units.values()) >= 0.8 * len(units)
    for key, unit in units.items():
        text = PLACEHOLDER.sub("", unit["text"])
        if unit["text"] == unit["source"]:
            continue  # nothing to translate (code fence) or a word that stays ("Bot")
        if lang == "ja":
            assert _KANA.search(text) or _HAN.search(text), key
        elif lang == "zh":
            assert _HAN.search(text) and not _KANA.search(text), key
        elif lang == "hi":
            assert _DEVANAGARI.search(text), key
            assert not re.search(r"तुम|तू\b", text), f"{key}: register is आप"
        else:
            assert not (_KANA.search(text) or _HAN.search(text) or _DEVANAGARI.search(text)), key
        if lang == "de":
            assert not re.search(r"\b(du|dich|dir|dein\w*)\b", text, re.IGNORECASE), f"{key}: register is Sie"
        if lang == "fr":
            assert not re.search(r"\b(tu|toi|ton|ta|tes)\b", text), f"{key}: register is vous"


def _corpus(name: str) -> list[dict[str, Any]]:
    lines = (CORPUS / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


@pytest.mark.parametrize("name", ["good.jsonl", "broken.jsonl"])
def test_corpus_lines_are_well_formed(name: str) -> None:
    rows = _corpus(name)
    assert len(rows) >= 60
    assert len({row["target_lang"] for row in rows}) >= 6
    for i, row in enumerate(rows, 1):
        assert {"source", "translation", "source_lang", "target_lang", "expect"} <= set(row), i
        assert row["source_lang"] == "en" and row["target_lang"] in LANGUAGES, i
        assert isinstance(row.get("protected", []), list), i
        assert set(row["expect"]) <= CODES and row["expect"] == sorted(set(row["expect"])), i
        assert (row["expect"] == []) == (name == "good.jsonl"), i


def test_broken_corpus_covers_every_code_alone() -> None:
    rows = _corpus("broken.jsonl")
    alone = collections.Counter(row["expect"][0] for row in rows if len(row["expect"]) == 1)
    assert {code: alone[code] for code in CODES} == {code: max(alone[code], 5) for code in CODES}
    assert len({(row["source"], row["translation"], row["target_lang"]) for row in rows}) == len(rows)


def test_good_corpus_keeps_placeholders_tags_and_protected_names() -> None:
    """The cheap half of "good": nothing a checker would need judgement for is broken."""
    for i, row in enumerate(_corpus("good.jsonl"), 1):
        source, text = row["source"], row["translation"]
        assert sorted(PLACEHOLDER.findall(source)) == sorted(PLACEHOLDER.findall(text)), i
        assert sorted(TAG.findall(source)) == sorted(TAG.findall(text)), i
        assert source.count("\n") == text.count("\n"), i
        for name in row.get("protected", []):
            if name in source:
                assert name in text, (i, name)
