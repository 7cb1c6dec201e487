"""``pg.check_translations``: the library function behind ``promptgrid check-translations`` (which calls it):
values back, typed errors, nothing printed."""

from __future__ import annotations

from pathlib import Path

import pytest

import promptgrid as pg
from promptgrid.matrix.cli import main
from promptgrid.translate import TranslationStore


def _store(tmp_path: Path) -> Path:
    path = tmp_path / "t.sqlite3"
    with TranslationStore(path) as store:
        store.put("Use the {format} format.", "de", "amazon", "Verwenden Sie das Format.", ok=True,
                  kind="instructions", keys=["x.k"])
    return path


def test_check_translations_returns_findings_and_prints_nothing(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    checks = pg.check_translations(["de"], store=_store(tmp_path))
    assert isinstance(checks, pg.TranslationChecks) and not checks.ok and checks.skipped == []
    (bad,) = checks.failures
    assert (bad.language, bad.key, bad.origin, bad.problems) == ("de", "x.k", "store:amazon",
                                                                 ("placeholder_missing",))
    assert {f.language for f in checks.findings} == {"de"} and len(checks.findings) > 100
    assert capsys.readouterr() == ("", "")
    assert pg.check_translations("de,ja").ok  # the shipped catalogs pass, a comma list is split
    assert main(["check-translations", "--lang", "de", "--store", str(tmp_path / "t.sqlite3")]) == 1
    assert "x.k" in capsys.readouterr().out


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"languages": ["xx-!"]}, pg.TranslationError, "xx-!"),
    ({"languages": ["en"]}, pg.TranslationError, "English is the source language"),
    ({"languages": [3]}, pg.TranslationError, "language codes"),
    ({"store": "missing.sqlite3"}, pg.TranslationError, "does not exist"),
])
def test_bad_input_is_a_typed_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kwargs: dict,
                                             error: type[Exception], match: str) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error, match=match) as info:
        pg.check_translations(**kwargs)
    assert "\n" not in str(info.value)


def test_a_file_that_is_not_a_store_is_a_store_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sqlite3"
    junk.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(pg.TranslationStoreError):
        pg.check_translations(["de"], store=junk)


def test_repr_is_one_short_line() -> None:
    import promptgrid as pg

    checks = pg.check_translations(["de"])
    text = repr(checks)
    assert "\n" not in text and len(text) < 200 and f"{len(checks.findings):,} findings" in text
