"""The translate CLI handlers, through ``promptgrid.matrix.cli.main`` (offline)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import promptgrid.translate as translate
from promptgrid.translate import TranslationStore

cli = pytest.importorskip("promptgrid.matrix.cli")


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_check_translations_passes_on_the_shipped_catalogs(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["check-translations"], capsys)
    assert code == 0, out + err
    assert "failed" not in out
    for lang in ("it", "de", "es", "ja", "hi", "zh", "fr", "pt"):
        assert f"translate/catalogs/{lang}.yaml" in out


def test_check_translations_reports_stored_failures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.sqlite3"
    with TranslationStore(path) as store:
        store.put("Use the {format} format.", "de", "amazon", "Verwenden Sie das Format.", ok=True,
                  kind="instructions", keys=["x.k"])
    code, out, _ = run(["check-translations", "--lang", "de", "--store", str(path)], capsys)
    assert code == 1
    assert "x.k" in out and "placeholder_missing" in out and "store:amazon" in out


def test_translate_with_the_catalog_backend_is_offline_and_cached(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.sqlite3"
    argv = ["translate", "--to", "de,ja", "--backend", "catalog", "--what", "all", "--dataset", "mini",
            "--store", str(path)]
    code, out, err = run(argv, capsys)
    assert code == 0, out + err
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line[:2] in ("de", "ja")}
    units, translated, from_catalog, stored, missing, failed = (int(x) for x in rows["de"])
    assert units == 37 + 138 and from_catalog == units and translated == stored == missing == failed == 0
    assert "350 unit(s) taken from the shipped catalogs, 0 already stored" in out
    assert "sent" not in out and "catalog catalogs" not in out  # a look-up sends nothing
    code, out, _ = run(argv, capsys)
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line[:2] in ("de", "ja")}
    assert [int(x) for x in rows["ja"]][1:4] == [0, 0, 175]
    assert "0 unit(s) taken from the shipped catalogs, 350 already stored" in out


def test_translate_into_a_language_without_catalog_or_backend_exits_2(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Before: "done", "155 translated" and nothing translated. Now: a one-line error naming what exists."""
    code, out, err = run(["translate", "--to", "de,ko", "--backend", "catalog", "--store", str(tmp_path / "t.sqlite3")],
                         capsys)
    assert code == 2 and out == "" and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert "no translations into ko" in err and "de, es, fr, hi, it, ja, pt, zh" in err
    assert "--backend amazon" in err and "llm:MODEL" in err and "catalog:PATH" in err
    with TranslationStore(tmp_path / "t.sqlite3") as store:
        assert list(store.rows()) == []  # nothing done, not even German


def test_translate_reports_failed_checks_and_exits_non_zero(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str],
                                                            recording: Any) -> None:
    backend = recording(lambda text: text)  # "translates" by copying: untranslated
    monkeypatch.setattr("promptgrid.matrix.cli.translate.make_backend", lambda spec, **_: backend)
    code, out, _ = run(["translate", "--to", "de", "--backend", "fake", "--what", "instructions",
                        "--store", str(tmp_path / "t.sqlite3")], capsys)
    assert code == 1
    assert "untranslated" in out and "classic.persona" in out
    assert len(backend.sent) == len(set(backend.sent))  # each unique string once


def test_translate_user_catalog_becomes_overrides(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text(
        'language: de\nkind: instructions\nreviewed: true\nunits:\n'
        '  classic.persona:\n    source: "You are an expert in composing functions."\n'
        '    text: "Du bist ein Profi im Zusammenstellen von Funktionsaufrufen."\n',
        encoding="utf-8",
    )
    store_path = tmp_path / "t.sqlite3"
    code, out, _ = run(["translate", "--to", "de", "--backend", f"catalog:{mine}", "--what", "instructions",
                        "--store", str(store_path)], capsys)
    assert code == 1  # the user catalog lacks most units: reported as missing
    assert f"no translation in the catalog file(s) {mine}" in out
    loc = translate.default_localization(store_path)
    assert loc.instruction("You are an expert in composing functions.", "de", "classic.persona") == \
        "Du bist ein Profi im Zusammenstellen von Funktionsaufrufen."


def test_unknown_backend_is_a_user_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["translate", "--to", "de", "--backend", "deepl"], capsys)
    assert code != 0 and "unknown translation backend 'deepl'" in err and "Traceback" not in err


def test_check_translation_jsonl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [
        {"source": "Use {x}.", "translation": "Benutze {x}.", "source_lang": "en", "target_lang": "de",
         "id": 7},
        {"source": "Use {x}.", "translation": "Benutze {y}.", "source_lang": "en", "target_lang": "de"},
        "not json",
        {"source": "Use {x}.", "target_lang": "de"},
    ]
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n\n",
                    encoding="utf-8")
    code, out, err = run(["check-translation", "--jsonl", str(path)], capsys)
    assert code == 1
    records = [json.loads(line) for line in out.splitlines()]
    assert records[0] == {**lines[0], "ok": True, "problems": []}  # every field kept
    assert records[1]["ok"] is False and records[1]["problems"] == ["placeholder_missing"]
    assert f"{path}:3: not valid JSON" in err
    assert f"{path}:4: field 'translation' is missing" in err


def test_check_translation_exits_zero_when_all_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"source": "Use {x}.", "translation": "Benutze {x}.", "source_lang": "en",
                                "target_lang": "de"}) + "\n", encoding="utf-8")
    assert run(["check-translation", "--jsonl", str(path)], capsys)[0] == 0


def test_all_is_complete() -> None:
    public = {name for name in vars(translate) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(translate, name)).__name__ == "module"}
    assert set(translate.__all__) == public - modules


def test_check_translation_reports_hostile_lines_and_checks_the_rest(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    good = json.dumps({"source": "Use {x}.", "translation": "Benutze {x}.", "source_lang": "en",
                       "target_lang": "de"}).encode()
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join([b"[" * 100_000 + b"]" * 100_000, b'{"source": ' + b"9" * 5000 + b"}",
                                b'{"source": "\xff"}', b'{"source": Infinity}', good]) + b"\n")
    code, out, err = run(["check-translation", "--jsonl", str(path)], capsys)
    assert code == 1 and "Traceback" not in err
    for number, fragment in ((1, "nested more than"), (2, "a number has 5000 characters"),
                             (3, "not valid UTF-8"), (4, "Infinity is not a JSON number")):
        assert f"{path}:{number}: {fragment}" in err
    assert [json.loads(line)["ok"] for line in out.splitlines()] == [True]


@pytest.mark.parametrize("command", [["check-translations", "--lang", "de"],
                                     ["translate", "--to", "de", "--backend", "catalog", "--what", "instructions"]])
def test_a_garbage_or_foreign_store_is_one_line_and_left_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               command: list[str]) -> None:
    """Before: check-translations --store printed a sqlite3 traceback; translate --store other.sqlite3 wrote
    its tables into the other program's database and exited 0."""
    import sqlite3

    garbage = tmp_path / "garbage.sqlite3"
    garbage.write_bytes(b"not a database\n" * 500)
    foreign = tmp_path / "other.sqlite3"
    db = sqlite3.connect(foreign)
    db.execute("CREATE TABLE users (id INTEGER)")
    db.commit()
    db.close()
    for path, words in ((garbage, "not a SQLite file"), (foreign, "not a promptgrid translation store")):
        before = path.read_bytes()
        code, out, err = run([*command, "--store", str(path)], capsys)
        assert code == 2, out + err
        assert err.count("\n") == 1 and err.startswith("promptgrid: error: ") and str(path) in err, err
        assert words in err and "Traceback" not in err
        assert path.read_bytes() == before


def test_check_translation_refuses_empty_and_unknown_language_codes(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Before: target_lang "" (or "zz-Bogus!", "xx") was checked against nothing and reported ok."""
    def line(**langs: str) -> dict[str, str]:
        return {"source": "Use {x}.", "translation": "Benutze {x}.", **langs}

    lines = [line(target_lang=""), line(target_lang="zz-Bogus!"), line(target_lang="xx"),
             line(source_lang="", target_lang="de"), line(target_lang="de-DE")]
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    code, out, err = run(["check-translation", "--jsonl", str(path)], capsys)
    assert code == 1
    assert f"{path}:1: field 'target_lang' is empty" in err
    assert f"{path}:2: field 'target_lang' 'zz-Bogus!' is not a language code" in err
    assert f"{path}:3: field 'target_lang' 'xx' is not a language promptgrid knows" in err
    assert f"{path}:4: field 'source_lang' is empty" in err
    assert [json.loads(x)["target_lang"] for x in out.splitlines()] == ["de-DE"]
    with pytest.raises(translate.TranslationError, match="target_lang is empty"):
        translate.check_translation("Use {x}.", "Benutze {x}.", "en", "")
    code, _, err = run(["translate", "--to", "xx", "--backend", "catalog", "--store", str(tmp_path / "s")], capsys)
    assert code != 0 and "'xx' is not a language promptgrid knows" in err
