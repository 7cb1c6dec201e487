"""Grid caps are typed and checked early (issue 20, Why 12): ``load_grid(max_variants=nan)`` turned the cap off,
and a 15 MB grid took 97 s and 1.4 GB before it was refused."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from promptgrid.errors import GridError, RunError
from promptgrid.matrix.cli import main
from promptgrid.matrix.running.config import load_run_config
from promptgrid.matrix.running.session import build_config, is_run_config
from promptgrid.variants import _yaml, load_grid

PRODUCT = "include:\n  - product: {return_format: [python, json], tool_call_tag: [true, false]}\n"


def big_grid(path: Path, size: int) -> Path:
    """A grid that lists one variant per line until it is ``size`` bytes (valid YAML, over every cap)."""
    line = "      - {return_format: json, prompt_style: classic, tool_call_tag: false}\n"
    head = "name: big\ninclude:\n  - variants:\n"
    path.write_text(head + line * ((size - len(head)) // len(line) + 1), encoding="utf-8")
    return path


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1, 0, True, False, 1.5, "10", None])
def test_max_variants_must_be_a_positive_integer(tmp_path: Path, value: object) -> None:
    path = tmp_path / "grid.yaml"
    path.write_text(PRODUCT, encoding="utf-8")
    with pytest.raises(GridError, match=r"^max_variants must be a positive integer, not "):
        load_grid(path, max_variants=value)  # type: ignore[arg-type]
    assert len(load_grid(path, max_variants=4)) == 4


@pytest.mark.parametrize("size", [_yaml.MAX_GRID_BYTES + 1, 15_000_000])
def test_a_big_grid_is_refused_before_it_is_parsed(tmp_path: Path, size: int) -> None:
    path = big_grid(tmp_path / "grid.yaml", size)
    start = time.perf_counter()
    with pytest.raises(GridError) as info:
        load_grid(path)
    assert time.perf_counter() - start < 0.5
    assert str(info.value) == (f"{path}: the file is {path.stat().st_size:,} bytes; grid files are limited to "
                               "262,144 bytes. Split it or check that it is the file you meant.")


def test_a_grid_under_the_cap_is_read(tmp_path: Path) -> None:
    path = tmp_path / "grid.yaml"
    path.write_text(PRODUCT + "#" * (_yaml.MAX_GRID_BYTES - len(PRODUCT) - 1) + "\n", encoding="utf-8")
    assert path.stat().st_size == _yaml.MAX_GRID_BYTES
    assert len(load_grid(path)) == 4


def test_a_stream_is_read_only_up_to_the_cap() -> None:
    """/dev/zero reports size 0: the read stops at the cap + 1 byte instead of filling memory."""
    with pytest.raises(GridError, match=r"^/dev/zero: the file is more than 1,000 bytes; grid files are limited to "
                                        r"1,000 bytes\."):
        _yaml.read_yaml_text(Path("/dev/zero"), "/dev/zero", GridError, 1000, "grid files")


def test_run_configs_have_the_same_cap(tmp_path: Path) -> None:
    path = big_grid(tmp_path / "run.yaml", _yaml.MAX_GRID_BYTES + 1)
    start = time.perf_counter()
    assert not is_run_config(path)  # not parsed: the grid loader reports the size
    with pytest.raises(RunError, match=r"run\.yaml: the file is [\d,]+ bytes; run configs are limited to 262,144"):
        load_run_config(path)
    with pytest.raises(GridError, match=r"grid files are limited to 262,144 bytes"):
        load_grid(build_config(path, "mini", models=["fake/auto"]).grid)
    assert time.perf_counter() - start < 1


def test_cli_refuses_a_15_mb_grid_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = big_grid(tmp_path / "grid.yaml", 15_000_000)
    start = time.perf_counter()
    code = main(["run", str(path), "--dataset", "mini", "--model", "fake/auto", "--run-dir", str(tmp_path / "r"),
                 "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2 and time.perf_counter() - start < 2
    assert err.count("\n") == 1 and "grid files are limited to 262,144 bytes" in err
