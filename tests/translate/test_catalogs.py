from __future__ import annotations

from pathlib import Path

import pytest

from promptgrid.translate import (
    CatalogError,
    CatalogIndex,
    UnitKind,
    check_catalog,
    instruction_units,
    load_catalog,
    shipped_catalogs,
)

CATALOG = """\
language: de
kind: instructions
reviewed: true
units:
  classic.persona:
    source: "You are an expert in composing functions."
    text: "Sie sind ein Experte im Zusammenstellen von Funktionsaufrufen."
  classic.heading_task:
    source: "The task"
    text: "Die Aufgabe"
"""


def test_load_and_look_up_by_source(tmp_path: Path) -> None:
    path = tmp_path / "de.yaml"
    path.write_text(CATALOG, encoding="utf-8")
    catalog = load_catalog(path)
    assert catalog.language == "de" and catalog.kind is UnitKind.INSTRUCTIONS and catalog.reviewed
    assert catalog.entries["classic.heading_task"].line == 8
    index = CatalogIndex([catalog])
    assert index.lookup(UnitKind.INSTRUCTIONS, "The task", "de-CH") == "Die Aufgabe"
    assert index.lookup(UnitKind.INSTRUCTIONS, "The task", "ja") is None
    assert index.lookup(UnitKind.DESCRIPTIONS, "The task", "de") is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("language: de\nunits: {a: [1, 2}\nkind: x\n", "invalid YAML"),
        ("language: deutsch\nunits: {}\n", "'language' must be a language code"),
        ("language: de\nkind: prose\nunits: {}\n", "'kind' must be"),
        ("language: de\nreviewed: yes please\nunits: {}\n", "'reviewed' must be true or false"),
        ("language: de\nunits:\n  a.b:\n    source: x\n", "line 3: unit 'a.b' must have string fields"),
        ("language: de\nunits:\n  a.b: {source: x, text: y, txet: z}\n", "unknown field 'txet'"),
        ("language: de\nunit: {}\n", "unknown top-level key 'unit'"),
        ("language: !!python/name:os.system\nunits: {}\n", r":1: tag !!python/name:os.system is not allowed"),
        ("language: de\nunits: {? [a]\n : {source: x, text: y}}\n", r":2: a key must be a plain string"),
        ("language: de\nunits: &u {a: *u}\n", r":2: an alias refers to a value that contains it"),
        ("language: de\nunits:\n  a.b: {source: x, text: y}\n  a.b: {source: x, text: z}\n",
         r":4: key 'a.b' appears twice"),
        ("language: de\nunits:\n  a.b: {source: x, text: y}\n  c: [unclosed\n", r":5: invalid YAML"),
        ("a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"{k}: &{k} [{', '.join([f'*{p}'] * 10)}]\n" for p, k in zip("abcdef", "bcdefg", strict=True)),
         r"aliases \(\*name\) would expand the file"),
    ],
)
def test_invalid_catalogs_name_file_line_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CatalogError, match=message) as info:
        load_catalog(path)
    assert str(path) in str(info.value)


def test_stale_and_missing_units_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "de.yaml"
    path.write_text(CATALOG, encoding="utf-8")
    english = {u.key: u for u in instruction_units(["classic"])}
    findings = {f.key: f for f in check_catalog(load_catalog(path), english)}
    assert findings["classic.persona"].ok
    assert findings["classic.heading_task"].problems == ("stale",)  # the English is "Task" now
    assert findings["classic.task"].problems == ("missing",)


def test_shipped_catalogs_are_found() -> None:
    catalogs = shipped_catalogs()
    kinds = {(c.language, c.kind) for c in catalogs}
    for lang in ("it", "de", "es", "ja", "hi", "zh"):
        assert (lang, UnitKind.INSTRUCTIONS) in kinds
        assert (lang, UnitKind.DESCRIPTIONS) in kinds
    assert {c.dataset for c in catalogs if c.kind is UnitKind.DESCRIPTIONS} == {"mini", "mini-mt"}
