"""promptgrid.safeio: hostile JSON lines cost one message each; outputs never destroy an input or a run's store."""

from __future__ import annotations

import io
import os
import stat
import threading
import time
from pathlib import Path

import pytest

from promptgrid.errors import InputLimitError, OutputError
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


# --------------------------------------------------------------------------- outputs respect what they replace


def test_symlink_to_a_regular_file_is_kept_and_points_at_the_new_content(tmp_path: Path) -> None:
    real_dir = tmp_path / "real"
    real_dir.mkdir()
    real = real_dir / "data.jsonl"
    real.write_text("old\n", encoding="utf-8")
    real.chmod(0o640)
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    atomic_write(link, "new\n")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text(encoding="utf-8") == "new\n"
    assert real.stat().st_mode & 0o777 == 0o640  # the replaced file's permissions are kept
    assert sorted(p.name for p in real_dir.iterdir()) == ["data.jsonl"]  # the temporary file was in real_dir
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.jsonl", "real"]


def test_regular_file_is_replaced_atomically(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    target.write_text("old\n", encoding="utf-8")
    before = target.stat().st_ino
    with atomic_output(target) as out:
        out.write("new\n")
        assert target.read_text(encoding="utf-8") == "old\n"  # nothing shows until the block ends
    assert target.read_text(encoding="utf-8") == "new\n" and target.stat().st_ino != before


def test_fifo_is_written_in_place_as_a_stream(tmp_path: Path) -> None:
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    atomic_write(fifo, "one\ntwo\n")
    reader.join(10)
    assert got == [b"one\ntwo\n"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still a FIFO, not a regular file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p"]


def test_symlink_to_a_character_device_is_written_in_place(tmp_path: Path) -> None:
    link = tmp_path / "sink"
    link.symlink_to(os.devnull)  # like /dev/stdout -> /proc/self/fd/1, without touching the real one
    atomic_write(link, "discarded\n")
    with atomic_output(link, binary=True) as out:
        out.write(b"x" * 100_000)
    assert link.is_symlink() and os.readlink(link) == os.devnull
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sink"]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_device_is_an_output_error(tmp_path: Path) -> None:
    link = tmp_path / "full"
    link.symlink_to("/dev/full")
    for target in ("/dev/full", link):
        with pytest.raises(OutputError, match="No space left on device"):
            atomic_write(target, "x\n")
        with pytest.raises(OutputError, match="No space left on device"), atomic_output(target, binary=True) as out:
            out.write(b"y" * (1 << 20))  # fails in write, not only at close
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode) and link.is_symlink()


def test_dash_is_standard_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert check_output("-", inputs=["-"]) == Path("-")
    with atomic_output("-") as out:
        out.write("to stdout\n")
    assert capsys.readouterr().out == "to stdout\n"
    assert not Path("-").exists()


def test_a_failed_flush_at_the_end_is_an_output_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Closed(io.StringIO):
        def flush(self) -> None:
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr("sys.stdout", Closed())
    with pytest.raises(OutputError, match="standard output: Broken pipe"), atomic_output("-") as out:
        out.write("x")


# --------------------------------------------------------------------------- bounded readers


def test_a_line_without_an_end_costs_one_bounded_read() -> None:
    with open("/dev/zero", "rb") as zero:
        start = time.perf_counter()
        with pytest.raises(InputLimitError, match=r"/dev/zero:1: the line is longer than 1 MiB"):
            list(read_json_lines(zero, max_line_bytes=1 << 20))
        assert time.perf_counter() - start < 2
        assert zero.tell() <= (1 << 20) + (1 << 17)  # read no further than the bound (and one buffer)


def test_line_and_file_bounds_and_their_environment_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exact = b'"' + b"a" * 98 + b'"\n'  # 100 bytes and its end (not counted): at the bound, read
    assert [x.value for x in read_json_lines(io.BytesIO(exact), max_line_bytes=100)] == ["a" * 98]
    assert [x.value for x in read_json_lines(io.BytesIO(exact[:-1]), max_line_bytes=100)] == ["a" * 98]
    with pytest.raises(InputLimitError, match="input:1: the line is longer than 99 bytes.*PROMPTGRID_MAX_LINE_BYTES"):
        list(read_json_lines(io.BytesIO(exact), max_line_bytes=99))
    with pytest.raises(InputLimitError, match="x.jsonl:2: the line is longer"):
        list(read_json_lines([b"1\n", exact], max_line_bytes=99, name="x.jsonl"))  # an in-memory list too
    assert len(list(read_json_lines([b"1\n", exact], max_line_bytes=100))) == 2
    monkeypatch.setenv("PROMPTGRID_MAX_LINE_BYTES", "99")
    with pytest.raises(InputLimitError, match="longer than 99 bytes"):
        list(read_json_lines(io.BytesIO(exact)))
    monkeypatch.setenv("PROMPTGRID_MAX_LINE_BYTES", "lots")
    with pytest.raises(InputLimitError, match="PROMPTGRID_MAX_LINE_BYTES='lots' is not a positive number"):
        list(read_json_lines(io.BytesIO(exact)))
    monkeypatch.delenv("PROMPTGRID_MAX_LINE_BYTES")
    big = tmp_path / "big.jsonl"
    big.write_bytes(b"1\n" * 1000)
    monkeypatch.setenv("PROMPTGRID_MAX_FILE_BYTES", "1000")
    with big.open("rb") as f, pytest.raises(InputLimitError, match=r"big.jsonl: the input is larger than 1000 bytes"):
        next(read_json_lines(f))  # a regular file is refused before its first line
    with pytest.raises(InputLimitError, match="larger than 1000 bytes"):
        list(read_json_lines(io.BytesIO(b"1\n" * 1000)))  # a stream when it passes the bound
    assert len(list(read_json_lines(io.BytesIO(b"1\n" * 500)))) == 500


def test_parse_json_line_checks_numbers_without_scanning_the_text() -> None:
    assert parse_json_line('{"e": 1e308, "big": ' + "9" * 400 + "}") == {"e": 1e308, "big": int("9" * 400)}
    for text, message in (("[1e309]", "out of range"), ("[" + "1" * 401 + "]", "401 characters"),
                          ('{"a": -Infinity}', "-Infinity is not a JSON number")):
        with pytest.raises(ValueError, match=message):
            parse_json_line(text)


def test_read_text_bounded(tmp_path: Path) -> None:
    from promptgrid.safeio import read_text_bounded

    (tmp_path / "a.json").write_text('{"a": "é"}', encoding="utf-8")
    assert read_text_bounded(tmp_path / "a.json", limit=11) == '{"a": "é"}'
    with pytest.raises(InputLimitError, match=r"a\.json: larger than 10 bytes"):
        read_text_bounded(tmp_path / "a.json", limit=10)
    with pytest.raises(InputLimitError, match="/dev/zero: larger than 1 MiB"):
        read_text_bounded("/dev/zero", limit=1 << 20)


def test_read_json_lines_can_require_objects() -> None:
    data = [b'{"a": 1}\n', b'[1, 2]\n', b'"text"\n', b'{"b": 2}\n', b'{bad\n']
    got = [(line.number, line.value, line.error) for line in read_json_lines(data, objects=True)]
    assert got[0] == (1, {"a": 1}, None) and got[3] == (4, {"b": 2}, None)
    assert got[1] == (2, None, "expected a JSON object, got list")
    assert got[2] == (3, None, "expected a JSON object, got str")
    assert got[4][2] is not None and "expected a JSON object" not in got[4][2]  # a parse error stays one
    assert [line.value for line in read_json_lines(data[:3])] == [{"a": 1}, [1, 2], "text"]  # default: any value
