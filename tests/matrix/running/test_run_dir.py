"""Run-directory identity and history: one grid + dataset per directory unless appended, every invocation kept.

Through ``promptgrid.run`` and the CLI entry point, on fake/auto (no network).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import promptgrid as pg
from promptgrid.matrix.cli import main
from promptgrid.matrix.running.session import RUN_JSON_VERSION

ONE = ["python->python,True"]  # one variant: each job is one quick fake call


def _record(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text(encoding="utf-8"))


def _run(run_dir: Path, grid: str = "bfcl_v4", dataset: str = "mini:en", **options: object) -> pg.Run:
    options.setdefault("models", ["fake/auto"])
    options.setdefault("limit", 2)
    if grid == "bfcl_v4":
        options.setdefault("variants", ONE)
    return pg.run(grid, dataset, run_dir=run_dir, **options)


def test_resume_and_extensions_are_not_refused_and_every_invocation_is_kept(tmp_path: Path) -> None:
    run_dir = tmp_path / "r"
    _run(run_dir)
    _run(run_dir)  # the same command
    _run(run_dir, limit=4)  # more cases
    _run(run_dir, limit=4, repeats=2)  # more repeats
    _run(run_dir, limit=4, models=["fake/auto", "fake/prose"])  # another model
    _run(run_dir, variants=None)  # the whole grid, of which one variant ran
    _run(run_dir, limit=1)  # part of what ran
    data = _record(run_dir)
    invocations = data["invocations"]
    assert data["version"] == RUN_JSON_VERSION and len(invocations) == 7
    assert [i["jobs"] for i in invocations] == [2, 2, 4, 8, 8, 52, 1]
    assert [i["config"]["limit"] for i in invocations] == [2, 2, 4, 4, 4, 2, 1]
    assert invocations[4]["models"] == ["fake/auto", "fake/prose"]
    first = invocations[0]
    assert first["grid"] == {"ref": "bfcl_v4", "name": "bfcl_v4", "selected": 1, "variants": 26,
                             "ids": sorted(v.id for v in pg.load_grid("bfcl_v4").variants)}
    assert first["dataset"] == {"ref": "mini:en", "selected": 2, "cases": 46}
    assert first["promptgrid_version"] == pg.__version__ and first["append"] is False
    assert all(i["finished"] and i["pending"] == 0 and "summary" in i for i in invocations)
    assert data["config"]["limit"] == 1  # the top level still describes the latest invocation
    assert pg.open_run(run_dir).config["invocations"] == invocations


def test_another_dataset_is_refused_before_any_call_unless_appended(tmp_path: Path) -> None:
    run_dir = tmp_path / "r"
    _run(run_dir)
    before = ((run_dir / "store.sqlite3").stat().st_size, (run_dir / "run.json").read_bytes())
    with pytest.raises(pg.RunError) as info:
        _run(run_dir, dataset="mini:de")
    message = str(info.value)
    assert str(run_dir / "run.json") in message and "\n" not in message
    assert "dataset mini:en (2 cases stored), not mini:de (0 of its 2 selected cases stored)" in message
    assert "--run-dir" in message and "--append" in message and "append=True" in message
    assert pg.open_run(run_dir).counts()["jobs"] == 2  # nothing planned, nothing sent
    assert (run_dir / "run.json").read_bytes() == before[1]

    run = _run(run_dir, dataset="mini:de", append=True)
    assert run.summary is not None and run.summary.sent == 2 and run.counts()["jobs"] == 4
    assert _record(run_dir)["invocations"][-1]["append"] is True
    # Once combined, each of the two commands resumes without complaint.
    assert _run(run_dir).summary.sent == 0  # type: ignore[union-attr]
    assert _run(run_dir, dataset="mini:de").summary.sent == 0  # type: ignore[union-attr]


def test_another_grid_is_refused(tmp_path: Path) -> None:
    run_dir = tmp_path / "r"
    _run(run_dir)
    with pytest.raises(pg.RunError, match=r"grid bfcl_v4 \(1 variants stored\), not massive_prompts \(0 of its 2 "):
        _run(run_dir, grid="massive_prompts")
    run = _run(run_dir, grid="massive_prompts", append=True)
    assert run.counts()["jobs"] == 6


def test_a_grid_whose_variants_include_the_stored_ones_is_refused(tmp_path: Path) -> None:
    """call_modes holds demo's 4 variants and 5 more: by name-blind variant sets, a change either way."""
    run_dir = tmp_path / "r"
    _run(run_dir, grid="demo", limit=1)
    with pytest.raises(pg.RunError) as info:
        _run(run_dir, grid="call_modes", limit=1)
    message = str(info.value)
    assert "grid demo (4 variants stored), not call_modes (4 of its 9 selected variants stored; its grid adds 5 " \
           "variant(s): json->concise_xml,False; " in message
    assert "--append" in message and "\n" not in message
    assert _run(run_dir, grid="call_modes", limit=1, append=True).summary.sent == 5  # type: ignore[union-attr]
    assert _run(run_dir, grid="demo", limit=1).summary.sent == 0  # type: ignore[union-attr]  # an earlier command

    other = tmp_path / "other"
    _run(other, grid="call_modes", limit=1)
    with pytest.raises(pg.RunError, match=r"not demo \(4 of its 4 selected variants stored; lacks 5: "):
        _run(other, grid="demo", limit=1)


def test_the_same_grid_file_with_another_variant_is_refused(tmp_path: Path) -> None:
    grid = tmp_path / "mine.yaml"
    one = "name: mine\nbase: {doc_format: json}\ninclude:\n  - product:\n      return_format: [json"
    grid.write_text(one + "]\n", encoding="utf-8")
    run_dir = tmp_path / "r"
    _run(run_dir, grid=str(grid), limit=1)
    grid.write_text(one + ", python]\n", encoding="utf-8")  # same name, one variant more
    with pytest.raises(pg.RunError, match=r"its grid adds 1 variant\(s\): json->python,False\)"):
        _run(run_dir, grid=str(grid), limit=1)
    with pytest.raises(pg.RunError, match="adds 1 variant"):  # the changed grid, even when its old part is selected
        _run(run_dir, grid=str(grid), limit=1, variants=["json->json,False"])
    assert _run(run_dir, grid=str(grid), limit=1, append=True).summary.sent == 1  # type: ignore[union-attr]


def test_a_record_without_variant_ids_is_judged_by_the_store_and_the_grid_size(tmp_path: Path) -> None:
    run_dir = tmp_path / "r"
    _run(run_dir, grid="demo", limit=1)
    data = _record(run_dir)
    for invocation in data["invocations"]:
        del invocation["grid"]["ids"]  # as a promptgrid before the ids wrote it
    (run_dir / "run.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(pg.RunError, match="its grid adds 5 variant"):
        _run(run_dir, grid="call_modes", limit=1)
    assert _run(run_dir, grid="demo", limit=2).summary.sent == 4  # type: ignore[union-attr]


def test_cli_refuses_with_exit_2_and_append_combines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "r"
    base = ["run", "bfcl_v4", "--model", "fake/auto", "--limit", "2", "--variant", ONE[0], "--run-dir", str(run_dir),
            "--no-progress"]
    assert main([*base, "--dataset", "mini:en"]) == 0
    capsys.readouterr()
    for extra in ([], ["--dry-run"]):
        assert main([*base, "--dataset", "mini:ja", *extra]) == 2
        err = capsys.readouterr().err
        assert "run.json: this run directory holds the results of dataset mini:en" in err
        assert "--append" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert main([*base, "--dataset", "mini:ja", "--dry-run", "--append"]) == 0
    assert main([*base, "--dataset", "mini:ja", "--append"]) == 0
    assert "2 calls sent" in capsys.readouterr().err
    assert [i["dataset"]["ref"] for i in _record(run_dir)["invocations"]] == ["mini:en", "mini:ja"]


def test_version_1_run_json_is_read_and_upgraded(tmp_path: Path) -> None:
    run_dir = tmp_path / "r"
    _run(run_dir)
    old = {"version": 1, "store_schema": 1, "config": _record(run_dir)["config"], "grid_name": "bfcl_v4",
           "variants": 1, "cases": 2,
           "invocations": [{"id": "1.0-1", "started": "2026-01-01T00:00:00+00:00",
                            "finished": "2026-01-01T00:01:00+00:00", "jobs": 2, "retry_errors": False,
                            "summary": {"sent": 2, "stopped": None}}]}
    (run_dir / "run.json").write_text(json.dumps(old), encoding="utf-8")
    assert pg.open_run(run_dir).config["invocations"][0]["id"] == "1.0-1"
    assert pg.report(run_dir).data.pending is None  # a finished version-1 invocation: nothing to say
    with pytest.raises(pg.RunError, match="dataset mini:en"):  # named from the version-1 config
        _run(run_dir, dataset="mini:de")
    _run(run_dir, limit=3)
    data = _record(run_dir)
    assert data["version"] == RUN_JSON_VERSION
    assert [i["id"] for i in data["invocations"]][0] == "1.0-1" and len(data["invocations"]) == 2
    assert data["invocations"][1]["jobs"] == 3 and data["invocations"][1]["pending"] == 0


def test_unreadable_run_json_stops_the_run_and_is_kept(tmp_path: Path) -> None:
    run_dir = tmp_path / "r"
    _run(run_dir)
    (run_dir / "run.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(pg.RunError, match=r"cannot read .*run\.json.*Move it aside"):
        _run(run_dir)
    assert (run_dir / "run.json").read_text(encoding="utf-8") == "{not json"


@pytest.mark.parametrize("hostile", ["[" * 100_000 + "]" * 100_000, '{"n": ' + "9" * 5000 + "}",
                                     '{"x": NaN}'], ids=["deep", "huge number", "nan"])
def test_hostile_run_json_is_one_line_error(tmp_path: Path, hostile: str) -> None:
    from promptgrid.matrix.running.session import read_run_json

    run_dir = tmp_path / "r"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(hostile, encoding="utf-8")
    with pytest.raises(pg.RunError, match=r"cannot read .*run\.json.*Move it aside"):
        read_run_json(run_dir)
