"""docs/run-config.example.yaml: shows every key the run config accepts, loads, and dry-runs with no key."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from promptgrid.matrix.cli import main
from promptgrid.matrix.running import config

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "docs" / "run-config.example.yaml"

# The commented-out model of the example (a real provider, so the file as written needs no key).
_COMMENTED_MODEL = re.compile(r"^  # (- name: openai/my-model|  api_base:|  api_key_env:|  constraints:|  batch:|"
                              r"    max_requests:|    max_bytes:)", re.MULTILINE)


def _uncommented(text: str) -> str:
    return _COMMENTED_MODEL.sub(r"  \1", text)


def _keys(text: str) -> set[str]:
    """Every mapping key written in the YAML text (commented lines ignored)."""
    lines = (line.split("#", 1)[0] for line in text.splitlines())
    return {m.group(1) for line in lines if (m := re.match(r"\s*(?:- )?([a-z_]+):", line))}


def test_every_run_config_key_is_shown() -> None:
    keys = _keys(_uncommented(EXAMPLE.read_text(encoding="utf-8")))
    missing = (set(config._TOP_KEYS) | set(config._MODEL_KEYS)) - keys
    assert not missing, f"docs/run-config.example.yaml does not show {sorted(missing)}"
    assert set(config.PARAM_BOUNDS) <= keys  # the generation parameters checked for bounds


def test_the_example_loads_with_its_commented_model_too(tmp_path: Path) -> None:
    loaded = config.load_run_config(EXAMPLE)
    assert [m["name"] for m in loaded["models"]] == ["fake/auto", "fake/prose"]
    assert loaded["run_dir"] == str(EXAMPLE.parent / "../runs/example")
    copy = tmp_path / "run.yaml"
    copy.write_text(_uncommented(EXAMPLE.read_text(encoding="utf-8")), encoding="utf-8")
    third = config.load_run_config(copy)["models"][2]
    assert third["api_base"] == "http://127.0.0.1:8000/v1" and third["api_key_env"] == "MY_SERVER_KEY"
    assert third["concurrency"] == 8 and third["timeout"] == 120  # from defaults
    assert third["batch"] == {"max_requests": 50000, "max_bytes": 200000000}


def test_the_example_dry_runs_without_keys(tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MY_SERVER_KEY"):
        monkeypatch.delenv(name, raising=False)
    run_dir = tmp_path / "run"
    assert main(["run", str(EXAMPLE), "--dry-run", "--run-dir", str(run_dir), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "dry run: nothing is sent" in out and "fake/auto" in out and "fake/prose" in out
    assert "2 model(s) x 26 variants x 4 cases" in out
    assert not run_dir.exists()
