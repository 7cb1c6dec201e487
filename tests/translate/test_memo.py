"""Check results kept between commands (``translate._memo``): the same translation is not checked twice by the
same code, and a changed check, a damaged file or a back-translation never reads an old result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from promptgrid.translate import _memo
from promptgrid.translate._check import CheckCode, check_translation
from promptgrid.translate._memo import CheckMemo, memo


def _no_check(*_args: Any, **_kwargs: Any) -> Any:
    raise AssertionError("checked again")


def test_a_result_is_read_back_by_the_next_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "checks.json"
    first = CheckMemo(path)
    ok = first.check("Use {x}.", "Benutze {x}.", "en", "de")
    bad = first.check("Use {x}.", "Benutze {y}.", "en", "de", ["x"])
    assert ok == check_translation("Use {x}.", "Benutze {x}.", "en", "de")
    assert bad.problems == [CheckCode.PLACEHOLDER_MISSING]
    first.flush()
    monkeypatch.setattr(_memo, "check_translation", _no_check)
    second = CheckMemo(path)
    assert second.check("Use {x}.", "Benutze {x}.", "en", "de") == ok
    assert second.check("Use {x}.", "Benutze {y}.", "en", "de", ["x"]) == bad
    with pytest.raises(AssertionError, match="checked again"):  # other protected names: another key
        second.check("Use {x}.", "Benutze {y}.", "en", "de", ["y"])
    with pytest.raises(AssertionError, match="checked again"):  # a back-translation is always asked
        second.check("Use {x}.", "Benutze {x}.", "en", "de", back_translator=object())


def test_a_damaged_or_foreign_file_is_ignored_and_replaced(tmp_path: Path) -> None:
    path = tmp_path / "checks.json"
    for text in ("not json", json.dumps([1, 2]), json.dumps({"k": [["no_such_code"], {}]})):
        path.write_text(text, encoding="utf-8")
        kept = CheckMemo(path)
        assert kept.check("Hello.", "Hallo.", "en", "de").ok
        kept.flush()
        assert len(json.loads(path.read_text(encoding="utf-8"))) == 1


def test_another_checking_code_uses_another_file_and_removes_the_old(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    kept = CheckMemo()
    kept.check("Hello.", "Hallo.", "en", "de")
    kept.flush()
    old = kept.path
    assert old.parent == tmp_path / "promptgrid" and old.name.startswith("checks-")
    monkeypatch.setattr(_memo, "_fingerprint", lambda: "changed")
    newer = CheckMemo()
    newer.check("Hello.", "Hallo.", "en", "de")
    newer.flush()
    assert newer.path.name == "checks-changed.json" and newer.path.exists() and not old.exists()


def test_check_translations_runs_no_check_the_second_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The shipped catalogs' 2,264 checks (and the language model they need) are paid for once."""
    import promptgrid as pg

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = pg.check_translations("de")
    assert first.ok and memo().path.exists()
    _memo._MEMOS.clear()  # as a new process: the file only
    monkeypatch.setattr(_memo, "check_translation", _no_check)
    assert pg.check_translations("de").findings == first.findings


def test_an_unwritable_cache_is_no_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    kept = CheckMemo(blocker / "checks.json")  # its folder is a file
    assert kept.check("Hello.", "Hallo.", "en", "de").ok
    kept.flush()
