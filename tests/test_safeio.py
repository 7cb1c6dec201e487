"""promptgrid.safeio: hostile JSON lines cost one message each; outputs never destroy an input or a run's store."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import pytest

from promptgrid.errors import OutputError
from promptgrid.safeio import (
    MAX_DEPTH,
    RUN_DIR_FILES,
    atomic_output,
    atomic_write,
    check_output,
    parse_json_line,
    read_json_lines,
)

DEEP = b"[" * 100_000 + b"]" * 100_000
HOSTILE = {
    "deep": (DEEP, "nested more than"),
    "deep object": (b'{"a":' * 100_000 + b"1" + b"}" * 100_000, "nested more than"),
    "huge int": (b'{"a": ' + b"9" * 5000 + b"}", "a number has 5000 characters"),
    "huge float": (b'{"a": 1.' + b"5" * 5000 + b"}", "a number has 5002 characters"),
    "overflowing float": (b'{"a": 1e999}', "out of range"),
    "nan": (b'{"a": NaN}', "NaN is not a JSON number"),
    "infinity": (b'[-Infinity]', "-Infinity is not a JSON number"),
    "bad utf-8": (b'{"a": "\xff\xfe"}', "not valid UTF-8 (byte 0xff at byte 8)"),
    "lone surrogate": (b'{"a": "\\ud800"}', "unpaired surrogate"),
    "broken": (b'{"a": ', "not valid JSON (Expecting value at column 7)"),
}


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_line_is_one_error_and_the_other_lines_are_read(name: str) -> None:
    payload, message = HOSTILE[name]
    start = time.perf_counter()
    lines = list(read_json_lines(io.BytesIO(b'{"n": 1}\n' + payload + b'\n\n{"n": 3}\n')))
    assert time.perf_counter() - start < 2
    assert [(x.number, x.value) for x in lines if x.error is None] == [(1, {"n": 1}), (4, {"n": 3})]
    (bad,) = [x for x in lines if x.error is not None]
    assert bad.number == 2 and message in bad.error and "\n" not in bad.error


def test_bounds_do_not_refuse_ordinary_data() -> None:
    nested = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert parse_json_line(nested) is not None
    brackets_in_a_string = '{"a": "' + "[" * 10_000 + '"}'
    assert parse_json_line(brackets_in_a_string) == {"a": "[" * 10_000}
    assert parse_json_line('{"a": 1e300, "b": 12345678901234567890, "c": "\\ud83d\\ude00"}') == {
        "a": 1e300, "b": 12345678901234567890, "c": "\U0001F600"}
    digits_in_a_string = '{"a": "' + "7" * 5000 + '"}'
    assert parse_json_line(digits_in_a_string) == {"a": "7" * 5000}


def test_text_streams_and_byte_order_mark() -> None:
    lines = list(read_json_lines(io.StringIO('\ufeff{"a": 1}\n[NaN]\n')))
    assert lines[0].value == {"a": 1} and lines[1].error and lines[1].number == 2
    assert next(read_json_lines(io.BytesIO(b'\xef\xbb\xbf{"a": 1}\n'))).value == {"a": 1}


def test_output_equal_to_an_input_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("keep\n", encoding="utf-8")
    link = tmp_path / "link.jsonl"
    link.symlink_to(src)
    for spelling in (src, tmp_path / "." / "in.jsonl", link):
        with pytest.raises(OutputError, match="is the input file"):
            check_output(spelling, inputs=[src])
    assert src.read_text(encoding="utf-8") == "keep\n"
    assert check_output(tmp_path / "out.jsonl", inputs=[src]) == tmp_path / "out.jsonl"


@pytest.mark.parametrize("name", RUN_DIR_FILES)
def test_run_directory_files_are_refused(tmp_path: Path, name: str) -> None:
    (tmp_path / "store.sqlite3").write_bytes(b"store")
    with pytest.raises(OutputError, match="is a file of the run directory") as info:
        atomic_write(tmp_path / name, "x")
    assert "\n" not in str(info.value)
    assert (tmp_path / "store.sqlite3").read_bytes() == b"store"
    atomic_write(tmp_path / "results.jsonl", "ok\n")  # other files in a run directory are fine


@pytest.mark.parametrize("name", ["spill-123.jsonl", "spill-1-x.jsonl"])
def test_spill_files_are_refused(tmp_path: Path, name: str) -> None:
    """A spill file holds answers the next run stores (and then deletes): an output there would be lost too."""
    (tmp_path / "store.sqlite3").write_bytes(b"store")
    (tmp_path / "spill-123.jsonl").write_text('{"call": {}}\n', encoding="utf-8")
    with pytest.raises(OutputError, match="is a file of the run directory") as info:
        atomic_write(tmp_path / name, "x")
    assert "\n" not in str(info.value)
    assert (tmp_path / "spill-123.jsonl").read_text(encoding="utf-8") == '{"call": {}}\n'
    assert not (tmp_path / "spill-1-x.jsonl").exists()
    atomic_write(tmp_path / "spill.jsonl", "ok\n")  # not the pattern
    atomic_write(tmp_path.parent / name, "ok\n")  # no store beside it: an ordinary file


def test_run_json_elsewhere_and_bad_targets(tmp_path: Path) -> None:
    atomic_write(tmp_path / "run.json", "{}")  # no store beside it: an ordinary file
    with pytest.raises(OutputError, match="is a directory"):
        check_output(tmp_path)
    with pytest.raises(OutputError, match="does not exist"):
        check_output(tmp_path / "missing" / "out.jsonl")


def test_atomic_output_keeps_the_old_file_when_writing_fails(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    target.write_text("old\n", encoding="utf-8")
    with pytest.raises(RuntimeError), atomic_output(target) as out:
        out.write("half")
        raise RuntimeError("boom")
    assert target.read_text(encoding="utf-8") == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]  # no temporary file left
    with atomic_output(target) as out:
        out.write("new\n")
    assert target.read_text(encoding="utf-8") == "new\n"
    mask = os.umask(0)
    os.umask(mask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~mask
    assert atomic_write(tmp_path / "b.bin", b"\x00\x01").read_bytes() == b"\x00\x01"
