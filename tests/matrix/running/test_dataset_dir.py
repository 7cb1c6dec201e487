"""The default run directory names a ``jsonl:`` dataset by its normalised path: ``jsonl:./k.jsonl`` and
``jsonl:k.jsonl`` resume each other, and a directory named the old way is still found."""

from __future__ import annotations

from pathlib import Path

import pytest

import promptgrid as pg
from promptgrid.matrix.datasets import write_jsonl
from promptgrid.matrix.running.config import dataset_key, default_run_dir

DEMO_PROMPT = ["json->json,False"]


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    write_jsonl(pg.load_dataset("mini:en")[:2], tmp_path / "kitchen.jsonl")
    (tmp_path / "sub").mkdir()
    return tmp_path


def test_one_file_is_one_key_however_its_path_is_spelled(in_tmp: Path) -> None:
    spellings = ["jsonl:kitchen.jsonl", "jsonl:./kitchen.jsonl", f"jsonl:{in_tmp}/kitchen.jsonl",
                 "jsonl:sub/../kitchen.jsonl", f"jsonl:../{in_tmp.name}/kitchen.jsonl", "jsonl: kitchen.jsonl"]
    assert {dataset_key(s) for s in spellings} == {"jsonl:kitchen.jsonl"}
    assert {default_run_dir("demo", s) for s in spellings} == {Path("runs/demo__jsonl_kitchen.jsonl")}
    assert dataset_key("jsonl:/elsewhere/k.jsonl") == "jsonl:/elsewhere/k.jsonl"  # outside: absolute, as before
    assert dataset_key("mini:en") == "mini:en"


def test_the_two_spellings_resume_each_other(in_tmp: Path) -> None:
    first = pg.run("demo", "jsonl:./kitchen.jsonl", models=["fake/auto"], variants=DEMO_PROMPT)
    again = pg.run("demo", "jsonl:kitchen.jsonl", models=["fake/auto"], variants=DEMO_PROMPT)
    assert first.path == again.path == Path("runs/demo__jsonl_kitchen.jsonl")
    assert first.summary.sent == 2 and again.summary.sent == 0  # type: ignore[union-attr]


def test_a_directory_named_the_old_way_is_still_found(in_tmp: Path) -> None:
    old = pg.run("demo", "jsonl:./kitchen.jsonl", models=["fake/auto"], variants=DEMO_PROMPT,
                 run_dir="runs/demo__jsonl_._kitchen.jsonl")  # the name promptgrid gave it before
    assert default_run_dir("demo", "jsonl:./kitchen.jsonl") == old.path
    resumed = pg.run("demo", "jsonl:./kitchen.jsonl", models=["fake/auto"], variants=DEMO_PROMPT)
    assert resumed.path == old.path and resumed.summary.sent == 0  # type: ignore[union-attr]
