"""`promptgrid run / score / export` through the CLI entry point, on the mini dataset and fake/auto."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promptgrid.matrix.cli import main
from promptgrid.matrix.running.store import RunStore


def test_run_twice_second_makes_no_calls(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "r"
    argv = ["run", "bfcl_v4", "--dataset", "mini", "--model", "fake/auto", "--limit", "2", "--run-dir", str(run_dir),
            "--no-progress"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "52 calls sent" in err and "all variants" in out and "fake/auto" in out
    assert (run_dir / "store.sqlite3").exists() and (run_dir / "run.json").exists()
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "nothing to send" in err and "no model calls" in err and "all variants" in out
    data = json.loads((run_dir / "run.json").read_text())
    assert [i["summary"]["sent"] for i in data["invocations"]] == [52, 0]
    assert data["config"]["models"][0]["name"] == "fake/auto"

    assert main(["score", str(run_dir)]) == 0
    out, err = capsys.readouterr()
    assert "re-scored 52 responses" in err and "No model was called" in err

    assert main(["export", str(run_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 52 and json.loads(lines[0])["case_language"] == "en"


def test_dry_run_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "r"
    assert main(["run", "bfcl_v4", "--dataset", "mini", "--model", "fake/auto", "--limit", "3", "--run-dir",
                 str(run_dir), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "dry run" in out and "78 jobs" in out and "78 calls to send" in out
    assert not run_dir.exists()  # nothing created, nothing sent


def test_run_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "run.yaml"
    cfg.write_text("grid: bfcl_v4\ndataset: mini\nlimit: 1\nrun_dir: out\nvariants:\n"
                   "  - ret_fmt=json&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=classic\n"
                   "models:\n  - name: fake/auto\n    concurrency: 2\n    params: {max_tokens: 64, seed: 1}\n")
    assert main(["run", str(cfg), "--no-progress"]) == 0
    with RunStore(tmp_path / "out") as store:
        rows = list(store.rows())
    assert len(rows) == 1 and rows[0].params == {"max_tokens": 64, "seed": 1, "temperature": 0.0}
    assert rows[0].dimensions["return_format"] == "json"


def test_user_errors_exit_2_without_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("grid: bfcl_v4\ndataset: mini\nmodels:\n  - name: fake/auto\n    rmp: 3\n")
    assert main(["run", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml:5: models[0].rmp: unknown key. Did you mean 'rpm'?" in err and "Traceback" not in err
    assert main(["score", str(tmp_path / "missing")]) == 2
    assert "not a run directory" in capsys.readouterr().err
    assert main(["run", "bfcl_v4", "--dataset", "mini", "--model", "fake/nope", "--run-dir", str(tmp_path / "x")]) != 0
    assert "unknown fake model" in capsys.readouterr().err


def test_missing_key_variable_is_a_user_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROMPTGRID_TEST_NOPE_KEY", raising=False)
    cfg = tmp_path / "run.yaml"
    cfg.write_text("grid: bfcl_v4\ndataset: mini\nlimit: 1\nrun_dir: out\nmodels:\n"
                   "  - name: openai/gpt-4o-mini\n    api_key_env: PROMPTGRID_TEST_NOPE_KEY\n")
    assert main(["run", str(cfg), "--no-progress"]) == 2
    assert "PROMPTGRID_TEST_NOPE_KEY is not set" in capsys.readouterr().err


def test_run_with_a_garbage_translation_store_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: `run --store garbage.sqlite3` on a translated grid printed a sqlite3.DatabaseError traceback."""
    garbage = tmp_path / "garbage.sqlite3"
    garbage.write_bytes(b"\x00garbage" * 2000)
    code = main(["run", "massive_translation", "--dataset", "mini:de", "--model", "fake/auto", "--limit", "1",
                 "--store", str(garbage), "--run-dir", str(tmp_path / "r"), "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and str(garbage) in err and "not a SQLite file" in err and "Traceback" not in err
