"""The translation-check corpus (tests/translate/corpus/, written by the catalog reviewer).

Every broken line must be flagged with exactly its expected codes, and every
good line must raise nothing. Lines: ``{"source", "translation", "source_lang",
"target_lang", "protected"?, "expect": [codes]}``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from promptgrid.translate import check_translation

CORPUS = Path(__file__).parent / "corpus"


def _lines(name: str) -> list[Any]:
    path = CORPUS / name
    if not path.is_file():
        return [pytest.param(None, id=f"{name}-missing",
                             marks=pytest.mark.skip(reason=f"{path} not written yet"))]
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            out.append(pytest.param(json.loads(line), id=f"{name.split('.')[0]}:{number}"))
    return out


def _check(record: dict[str, Any]) -> set[str]:
    result = check_translation(record["source"], record["translation"], record.get("source_lang", "en"),
                               record["target_lang"], tuple(record.get("protected") or ()))
    assert result.ok == (not result.problems)
    return {p.value for p in result.problems}


@pytest.mark.parametrize("record", _lines("good.jsonl"))
def test_good_line_raises_nothing(record: dict[str, Any]) -> None:
    assert _check(record) == set(record.get("expect") or ())


@pytest.mark.parametrize("record", _lines("broken.jsonl"))
def test_broken_line_gets_exactly_its_codes(record: dict[str, Any]) -> None:
    assert record["expect"], "a broken line must expect at least one code"
    assert _check(record) == set(record["expect"])
