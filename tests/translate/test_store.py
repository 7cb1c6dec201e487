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


def _good_store(path: Path, n: int = 300) -> None:
    with TranslationStore(path) as s:
        for i in range(n):
            s.put(f"Hello number {i}, a sentence long enough to fill several pages of the file", "de", "amazon",
                  f"Hallo Nummer {i}", ok=True)
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.execute("PRAGMA journal_mode=DELETE")
    db.close()


def _damaged_stores(tmp_path: Path) -> dict[str, Path]:
    """Files that are not usable translation stores, each as a user might pass them to --store."""
    out = {name: tmp_path / f"{name}.sqlite3" for name in ("garbage", "foreign", "columns", "meta_only",
                                                           "truncated", "run_store", "newer")}
    out["garbage"].write_bytes(bytes(range(256)) * 20)
    db = sqlite3.connect(out["foreign"])
    db.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    db.execute("INSERT INTO users VALUES (1, 'ada')")
    db.commit()
    db.close()
    db = sqlite3.connect(out["columns"])
    db.executescript("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT); INSERT INTO meta VALUES "
                     "('schema_version', '1'); CREATE TABLE translations (a, b); CREATE TABLE overrides (a);")
    db.close()
    db = sqlite3.connect(out["meta_only"])
    db.executescript("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT); INSERT INTO meta VALUES "
                     "('schema_version', '1');")
    db.close()
    _good_store(tmp_path / "good.sqlite3")
    whole = (tmp_path / "good.sqlite3").read_bytes()
    out["truncated"].write_bytes(whole[: len(whole) // 3])
    from promptgrid.matrix.running.store import RunStore

    RunStore(out["run_store"], create=True).close()
    _good_store(out["newer"], 1)
    db = sqlite3.connect(out["newer"])
    db.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    db.commit()
    db.close()
    return out


def test_damaged_or_foreign_stores_are_refused_with_one_typed_line(tmp_path: Path) -> None:
    """Before: sqlite3.DatabaseError/OperationalError tracebacks on reading; `translate --store foreign.sqlite3`
    added the translation tables to the foreign database. Now: TranslationStoreError naming the file, and a
    foreign file is left byte for byte as it was."""
    from promptgrid.errors import TranslationStoreError

    for name, path in _damaged_stores(tmp_path).items():
        before = path.read_bytes()
        for readonly in (True, False):
            store = TranslationStore(path, readonly=readonly)
            with pytest.raises(TranslationStoreError) as info:
                store.lookup("Hello number 250, a sentence long enough to fill several pages of the file", "de")
                list(store.rows())
                store.put("x", "de", "amazon", "y", ok=True)
            message = str(info.value)
            assert str(path) in message and "\n" not in message, (name, message)
            assert ("newer promptgrid" in message) if name == "newer" else ("--store" in message), (name, message)
            store.close()
        assert path.read_bytes() == before, name
        assert not path.with_name(path.name + "-wal").exists(), name


def test_an_empty_file_becomes_a_store_and_an_existing_store_still_opens(tmp_path: Path) -> None:
    empty = tmp_path / "empty.sqlite3"
    empty.write_bytes(b"")
    assert TranslationStore(empty, readonly=True).lookup("a", "de") is None
    with TranslationStore(empty) as s:
        s.put("a", "de", "amazon", "b", ok=True)
    good = tmp_path / "good.sqlite3"
    _good_store(good, 3)
    with TranslationStore(good, readonly=True) as s:
        assert len(s) == 3
