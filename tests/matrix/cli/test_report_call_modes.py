"""End to end: the built-in ``call_modes`` grid on the fake model, then ``promptgrid report``."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from promptgrid.matrix.cli import main
from support.fake_server import FakeServer


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def test_call_modes_run_then_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "r"
    assert main(["run", "call_modes", "--dataset", "mini:en", "--limit", "3", "--model", "fake/auto", "--run-dir",
                 str(run_dir), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "Answers that parse as calls, per call mode: prompt 100% (12/12), native 100% (3/3), " \
           "constrained 100% (12/12)." in out
    assert main(["report", str(run_dir), "--format", "csv"]) == 0
    assert main(["report", str(run_dir), "--format", "md"]) == 0
    out = capsys.readouterr().out
    assert "fake/auto: native - prompt" in out and "fake/auto: constrained - prompt" in out
    report = run_dir / "report"
    md = (report / "report.md").read_text(encoding="utf-8")
    assert "## Call modes" in md and "(format tax)" in md and "failure modes per call mode" in md
    shares = _csv(report / "parse_share.csv")
    assert [(r["call_mode"], r["return_format"], r["n"]) for r in shares] == [
        ("prompt", "python", "3"), ("prompt", "json", "3"), ("prompt", "verbose_xml", "3"),
        ("prompt", "concise_xml", "3"), ("native", "-", "3"), ("constrained", "python", "3"),
        ("constrained", "json", "3"), ("constrained", "verbose_xml", "3"), ("constrained", "concise_xml", "3")]
    assert {r["parse_share"] for r in shares} == {"1.0"}
    effects = [r for r in _csv(report / "dimension_effects.csv") if r["dimension"] == "call_mode"]
    assert [(r["value"], r["reference"]) for r in effects] == [
        ("prompt", "prompt"), ("native", "prompt"), ("constrained", "prompt")]
    tax = _csv(report / "format_tax.csv")
    assert [(r["call_mode"], r["n_cases"]) for r in tax] == [("native", "3"), ("constrained", "3")]
    assert {r["call_mode"] for r in _csv(report / "results.csv")} == {"prompt", "native", "constrained"}


def test_unsupported_jobs_of_a_served_model_in_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "r"
    with FakeServer.thread() as srv:  # JSON-schema constraints only: constrained python/XML are unsupported
        assert main(["run", "call_modes", "--dataset", "mini:en", "--limit", "2", "--model", "openai/served",
                     "--api-base", srv.url, "--constraints", "openai", "--run-dir", str(run_dir),
                     "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["report", str(run_dir), "--format", "csv"]) == 0
    out = capsys.readouterr().out
    assert "json->python,False constrained" in out and "unsupported" in out.split("\n\n")[1]
    assert "6 job(s) were not sent" in out and "neither a verdict" not in out and "failed call" not in out
    rows = _csv(run_dir / "report" / "unsupported.csv")
    assert [(r["call_mode"], r["count"]) for r in rows] == [("constrained", "2")] * 3
    assert all("not JSON" in r["reason"] for r in rows)
    results = {r["variant_id"]: r for r in _csv(run_dir / "report" / "results.csv")}
    assert len(results) == 6 and {r["errors"] for r in results.values()} == {"0"}
    assert {r["unscored"] for r in results.values()} == {"0"}
