from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from promptgrid.translate import TranslationError, TranslationStore, default_store_path, source_hash


def test_default_path_follows_xdg_cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_store_path() == tmp_path / "xdg" / "promptgrid" / "translations.sqlite3"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_store_path() == tmp_path / "home" / ".cache" / "promptgrid" / "translations.sqlite3"


def test_key_is_source_hash_target_and_backend(store: TranslationStore) -> None:
    store.put("Hello", "de", "amazon", "Hallo", ok=True, keys=["a.k"])
    store.put("Hello", "de", "llm:m", "Servus", ok=True)
    store.put("Hello", "ja", "amazon", "こんにちは", ok=True)
    assert store.get("Hello", "de", "amazon").text == "Hallo"
    assert store.get("Hello", "de", "llm:m").text == "Servus"
    assert store.get("Hello ", "de", "amazon") is None  # the exact source text is the key
    assert len(store) == 3
    row = sqlite3.connect(store.path).execute("SELECT source_sha256 FROM translations LIMIT 1").fetchone()
    assert row[0] == source_hash("Hello")


def test_failed_translations_are_kept_but_never_looked_up(store: TranslationStore) -> None:
    store.put("Hello", "de", "amazon", "Hello", ok=False, problems=["untranslated"])
    stored = store.get("Hello", "de", "amazon")
    assert stored is not None and not stored.ok and stored.problems == ("untranslated",)
    assert store.lookup("Hello", "de") is None


def test_override_wins_over_machine_translation(store: TranslationStore) -> None:
    store.put("Hello", "de", "amazon", "Hallo", ok=True)
    assert store.lookup("Hello", "de") == "Hallo"
    store.set_override("Hello", "de", "Guten Tag")
    assert store.lookup("Hello", "de") == "Guten Tag"
    assert store.lookup("Hello", "de-AT") == "Guten Tag"  # regional code falls back to the language
    assert store.remove_override("Hello", "de")
    assert store.lookup("Hello", "de") == "Hallo"


def test_rows_list_overrides_and_translations(store: TranslationStore) -> None:
    store.put("A", "de", "amazon", "A-de", ok=True, kind="instructions", keys=["x.a"])
    store.set_override("B", "ja", "B-ja", kind="descriptions", keys=["f.description"])
    rows = list(store.rows())
    assert [(r.backend, r.target, r.keys) for r in rows] == [("override", "ja", ("f.description",)),
                                                            ("amazon", "de", ("x.a",))]
    assert [r.target for r in store.rows(["de"])] == ["de"]


def test_readonly_store_never_creates_the_file(tmp_path: Path) -> None:
    path = tmp_path / "nothing" / "t.sqlite3"
    store = TranslationStore(path, readonly=True)
    assert store.lookup("Hello", "de") is None
    assert list(store.rows()) == []
    assert not path.exists() and not path.parent.exists()
    with pytest.raises(TranslationError, match="read-only"):
        store.put("Hello", "de", "x", "y", ok=True)


def test_unwritable_store_says_what_to_do(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(TranslationError, match="--store"):
        TranslationStore(blocker / "sub" / "t.sqlite3").put("a", "de", "b", "c", ok=True)
