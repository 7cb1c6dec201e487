"""The plan is counted before it is built (issue 20, Why 5: ``run --repeats 100000000 --dry-run`` reached 20 GB):
over ``max_jobs`` it is one line naming the numbers and how to raise the cap; below it, jobs stream lazily."""

from __future__ import annotations

import itertools
import time
import tracemalloc
from pathlib import Path

import pytest

from promptgrid.errors import RunError
from promptgrid.matrix.cli import main
from promptgrid.matrix.running.config import load_run_config
from promptgrid.matrix.running.plan import MAX_JOBS, check_plan_size, iter_jobs
from promptgrid.matrix.running.session import build_config, prepare
from promptgrid.records import Prompt
from support.builders import bfcl_variants, numbered_cases


def test_check_plan_size_names_the_numbers_and_the_option() -> None:
    assert check_plan_size(2, 3, 26, 10) == 1560
    with pytest.raises(RunError) as info:
        check_plan_size(2, 100_000, 26, 10, max_jobs=1000)
    assert str(info.value) == (
        "the plan is 2 models x 26 variants x 10 cases x 100,000 repeats = 52,000,000 jobs, over the cap of 1,000 "
        "jobs. Use fewer repeats, cases (--limit) or variants, or raise the cap (--max-jobs N; max_jobs: N in a run "
        "config).")
    with pytest.raises(RunError, match=r"^the plan is 1 model x 100,000,000 repeats = at least 100,000,000 jobs, "
                                       r"over the cap of 5,000,000 jobs\."):
        check_plan_size(1, 100_000_000)
    assert MAX_JOBS == 5_000_000


def test_huge_repeats_are_refused_before_the_grid_is_read() -> None:
    start = time.perf_counter()
    with pytest.raises(RunError, match=r"1 model x 100,000,000 repeats = at least 100,000,000 jobs"):
        build_config("no-such-grid", "mini", models=["fake/auto"], repeats=100_000_000)
    assert time.perf_counter() - start < 1


def test_prepare_counts_variants_and_cases(tmp_path: Path) -> None:
    config = build_config("bfcl_v4", "mini", models=["fake/auto"], limit=2, repeats=100_000, run_dir=tmp_path / "r")
    with pytest.raises(RunError, match=r"1 model x 26 variants x 2 cases x 100,000 repeats = 5,200,000 jobs, over "
                                       r"the cap of 5,000,000 jobs"):
        prepare(config)
    raised = build_config(config, max_jobs=5_200_000)
    assert raised.max_jobs == 5_200_000
    assert prepare(raised).jobs == 5_200_000  # counted, not built


@pytest.mark.parametrize("value", [0, -1, 1.5, float("nan"), float("inf"), True, "10"])
def test_bad_max_jobs_is_refused(value: object) -> None:
    with pytest.raises(RunError, match=r"^max_jobs must be .* \(--max-jobs\)\.$"):
        build_config("bfcl_v4", "mini", models=["fake/auto"], max_jobs=value)  # type: ignore[arg-type]


def test_run_config_file_takes_max_jobs(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("grid: bfcl_v4\ndataset: mini\nmax_jobs: 12\nmodels: [fake/auto]\n", encoding="utf-8")
    assert load_run_config(path)["max_jobs"] == 12
    with pytest.raises(RunError, match=r"26 variants x 1 case x 1 repeat = 26 jobs, over the cap of 12 jobs"):
        prepare(build_config(path, limit=1))
    path.write_text("grid: bfcl_v4\ndataset: mini\nmax_jobs: .nan\nmodels: [fake/auto]\n", encoding="utf-8")
    with pytest.raises(RunError, match=r"run\.yaml:3: max_jobs: expected an integer, got float nan"):
        load_run_config(path)


@pytest.mark.parametrize("dry_run", [True, False])
def test_cli_run_with_huge_repeats_ends_at_once_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], dry_run: bool
) -> None:
    run_dir = tmp_path / "r"
    start = time.perf_counter()
    code = main(["run", "bfcl_v4", "--dataset", "mini", "--model", "fake/auto", "--limit", "1", "--repeats",
                 "100000000", "--run-dir", str(run_dir), "--no-progress", *(["--dry-run"] if dry_run else [])])
    err = capsys.readouterr().err
    assert code == 2
    assert time.perf_counter() - start < 5
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "100,000,000 jobs, over the cap of 5,000,000 jobs" in err and "--max-jobs N" in err
    assert not run_dir.exists()


def test_cli_max_jobs_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["run", "bfcl_v4", "--dataset", "mini", "--model", "fake/auto", "--limit", "1", "--run-dir",
            str(tmp_path / "r"), "--dry-run"]
    assert main([*args, "--max-jobs", "25"]) == 2
    assert "26 jobs, over the cap of 25 jobs" in capsys.readouterr().err
    assert main([*args, "--max-jobs", "26"]) == 0
    assert "26 jobs" in capsys.readouterr().out


class _Renderer:
    def render(self, variant, case) -> Prompt:
        return Prompt(variant.id, case.id, ({"role": "user", "content": f"{variant.id}|{case.id}"},))


def test_jobs_stream_without_memory_growing_with_repeats() -> None:
    tracemalloc.start()
    try:
        jobs = iter_jobs("m", {"seed": 7}, bfcl_variants(2), numbered_cases(2), 1_000_000, _Renderer())
        first = list(itertools.islice(jobs, 3))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [j.repeat for j in first] == [0, 1, 2]
    assert peak < 2 * 2**20, f"{peak:,} bytes"  # one parameter dict per repeat would be hundreds of MB


def test_repeats_past_the_cached_ones_get_their_own_seed() -> None:
    jobs = list(iter_jobs("m", {"seed": 7, "temperature": 0.7}, bfcl_variants(1), numbered_cases(1), 3000,
                          _Renderer()))
    assert [j.params["seed"] for j in jobs] == [7 + r for r in range(3000)]
    assert len({j.key for j in jobs}) == 3000


def test_pg_run_takes_max_jobs(tmp_path: Path) -> None:
    import promptgrid as pg

    with pytest.raises(RunError, match=r"26 variants x 1 case x 1 repeat = 26 jobs, over the cap of 25 jobs"):
        pg.run("bfcl_v4", "mini", models=["fake/auto"], limit=1, run_dir=tmp_path / "r", max_jobs=25)
    with pytest.raises(RunError, match=r"100,000,000 repeats = at least 100,000,000 jobs"):
        pg.run("bfcl_v4", "mini", models=["fake/auto"], repeats=100_000_000, run_dir=tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_export_batch_takes_max_jobs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["export-batch", str(tmp_path / "r"), "--model", "hosted_vllm/served", "--grid", "bfcl_v4", "--dataset",
            "mini", "--limit", "1", "-o", str(tmp_path / "requests.jsonl")]
    assert main([*args, "--max-jobs", "25"]) == 2
    err = capsys.readouterr().err
    assert "26 jobs, over the cap of 25 jobs" in err and err.count("\n") == 1
    assert not (tmp_path / "requests.jsonl").exists()
    assert main([*args, "--max-jobs", "26"]) == 0
    assert len((tmp_path / "requests.jsonl").read_text(encoding="utf-8").splitlines()) == 26
