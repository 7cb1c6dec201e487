"""Outputs through the CLI respect what is at the path (FIFO, symlink, device, ``-``) and a failed write exits
non-zero; JSONL inputs without a line end (``/dev/zero``) end with one line, quickly."""

from __future__ import annotations

import io
import json
import os
import stat
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from promptgrid.matrix.cli import main

PY = "ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=classic"
LINE = {"variant_id": PY, "case_id": "simple_weather_01-en",
        "response": "[weather.get_current(city='Chicago', unit='fahrenheit')]"}
MODEL = "hosted_vllm/served"


def _input(tmp_path: Path) -> Path:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(LINE) + "\n", encoding="utf-8")
    return src


def _score(src: Path, out: str | Path) -> int:
    return main(["score-file", str(src), "--dataset", "mini", "--output", str(out)])


def test_score_file_into_a_fifo_keeps_the_fifo(tmp_path: Path, capsys: Any) -> None:
    src, fifo = _input(tmp_path), tmp_path / "p"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    assert _score(src, fifo) == 0
    reader.join(10)
    assert json.loads(got[0])["valid"] is True
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_score_file_through_symlinks_keeps_them(tmp_path: Path, capsys: Any) -> None:
    src, real, link, sink = _input(tmp_path), tmp_path / "real.jsonl", tmp_path / "link.jsonl", tmp_path / "sink"
    real.write_text("old\n", encoding="utf-8")
    link.symlink_to(real)
    sink.symlink_to(os.devnull)  # a symlink to a character device, as /dev/stdout is to /proc/self/fd/1
    assert _score(src, link) == 0 and _score(src, sink) == 0
    assert link.is_symlink() and json.loads(real.read_text(encoding="utf-8"))["valid"] is True
    assert sink.is_symlink() and os.readlink(sink) == os.devnull and stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_score_file_output_dash_is_standard_output(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    assert _score(_input(tmp_path), "-") == 0
    assert json.loads(capsys.readouterr().out)["valid"] is True
    assert not (tmp_path / "-").exists()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_device_exits_non_zero_with_one_line(tmp_path: Path, capsys: Any) -> None:
    full = tmp_path / "full"
    full.symlink_to("/dev/full")
    assert _score(_input(tmp_path), full) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [f"promptgrid: error: cannot write {full}: No space left on device. Nothing "
                                        "more was written; free space or give another output path."]
    assert full.is_symlink() and stat.S_ISCHR(os.stat("/dev/full").st_mode)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_export_batch_into_a_full_device_exits_non_zero(tmp_path: Path, capsys: Any) -> None:
    full = tmp_path / "full"
    full.symlink_to("/dev/full")
    code = main(["export-batch", str(tmp_path / "run"), "--model", MODEL, "--grid", "bfcl_v4", "--dataset", "mini:en",
                 "--limit", "1", "--variant", PY, "-o", str(full)])
    assert code == 2
    assert "No space left on device" in capsys.readouterr().err
    assert full.is_symlink()


@pytest.mark.parametrize("argv", [["check-translation", "--jsonl", "/dev/zero"],
                                  ["score-file", "/dev/zero", "--dataset", "mini"]])
def test_a_line_without_an_end_is_one_error_line(argv: list[str], capsys: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("PROMPTGRID_MAX_LINE_BYTES", str(1 << 20))
    start = time.perf_counter()
    assert main(argv) == 2
    assert time.perf_counter() - start < 5
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["promptgrid: error: /dev/zero:1: the line is longer than 1 MiB, the bound for one JSON line; if "
                   "the file is what you meant, set PROMPTGRID_MAX_LINE_BYTES to more bytes."]


def test_import_batch_of_dev_zero_is_one_error_line(tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    run_dir = tmp_path / "run"
    assert main(["export-batch", str(run_dir), "--model", MODEL, "--grid", "bfcl_v4", "--dataset", "mini:en",
                 "--limit", "1", "--variant", PY, "-o", str(tmp_path / "requests.jsonl")]) == 0
    capsys.readouterr()
    monkeypatch.setenv("PROMPTGRID_MAX_LINE_BYTES", str(1 << 20))
    assert main(["import-batch", str(run_dir), "/dev/zero"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("promptgrid: error: /dev/zero:1: the line is longer than 1 MiB")


def test_downloaded_batch_output_is_read_line_by_line_within_the_bound(monkeypatch: Any) -> None:
    from promptgrid.errors import InputLimitError
    from promptgrid.matrix.running.batch import _lines_of

    class Echo:
        def decode(self, raw: bytes, where: str) -> tuple[bytes, str]:
            return raw, where

    got = list(_lines_of(Echo(), io.BytesIO(b'{"a": 1}\n\n{"b": 2}'), "batch b output file f"))  # type: ignore[arg-type]
    assert got == [(b'{"a": 1}\n', "batch b output file f:1"), (b'{"b": 2}', "batch b output file f:3")]
    monkeypatch.setenv("PROMPTGRID_MAX_LINE_BYTES", str(1 << 20))
    with pytest.raises(InputLimitError, match="batch b output file f:2: the line is longer than 1 MiB"):
        list(_lines_of(Echo(), io.BytesIO(b"{}\n" + b"x" * (2 << 20)), "batch b output file f"))  # type: ignore[arg-type]


@pytest.mark.skipif(not Path("/dev/full").is_char_device(), reason="needs /dev/full")
def test_standard_output_on_a_full_device_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """`promptgrid render ... > /dev/full`: the default output failing is the command's error, not a traceback
    (nor a message blaming the run directory); /dev/full stays the device it is."""
    import subprocess
    import sys

    with open("/dev/full", "wb") as full:
        done = subprocess.run([sys.executable, "-m", "promptgrid.matrix.cli", "render", "demo", "--dataset", "mini",
                               "--limit", "1"], stdout=full, stderr=subprocess.PIPE, text=True, timeout=120,
                              cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == "promptgrid: error: cannot write standard output: No space left on device."
    assert Path("/dev/full").is_char_device()
