"""Bounded reading of untrusted JSON lines, and output files that never destroy an input, a run's store or
whatever else is at the path.

Every command that reads a JSONL file a user names (``jsonl:`` datasets,
``score-file``, ``check-translation --jsonl``, ``import-batch``, exported
results, downloaded batch outputs) reads it with ``read_json_lines``: each line
is read with a bounded ``readline`` (at most ``MAX_LINE_BYTES``; the whole
input at most ``MAX_FILE_BYTES``), decoded and parsed on its own, within bounds
(nesting depth, digits per number, finite numbers only, valid UTF-8), and a bad
line becomes a ``JSONLine`` with an ``error`` instead of an exception, so the
caller reports ``file:line`` and goes on with the other lines. Hostile input
(100,000 nested brackets, a 5,000-digit integer, NaN, stray bytes) thus costs one
message, never a traceback. A line or a file over its size bound stops the read
with one ``InputLimitError`` (``/dev/zero`` has no line end: it costs one read of
``MAX_LINE_BYTES``). Both bounds can be raised for one process with the
environment variables ``PROMPTGRID_MAX_LINE_BYTES`` and
``PROMPTGRID_MAX_FILE_BYTES`` (bytes), or per call with the keyword arguments of
``read_json_lines``.

Every command that writes a file a user names (``score-file --output``,
``export --output``, ``export-batch -o``, ``report``/``compare --out``) writes
it with ``atomic_output`` or ``atomic_write``: the path is refused when it is one
of the command's inputs or a run directory's own files (``store.sqlite3``, its
journal, ``run.json``, ``run.lock``, the ``spill-*.jsonl`` answers a full disk
left). A new path, a regular file or a symlink to one gets the content through a
temporary file in the real file's directory, renamed over the real file only
when complete (a symlink is kept and points at the new file), so a failure never
leaves half a file and never truncates what is being read. Anything else (a
FIFO, a character device such as ``/dev/null``, ``/dev/stdout``, ``-`` for
standard output) is written in place as a stream, never replaced or removed. A
write that fails (``ENOSPC`` on ``/dev/full``, ``EPIPE``), including at flush or
close, is an ``OutputError``.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
import re
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, overload

from promptgrid.errors import InputLimitError, OutputError

__all__ = [
    "MAX_ARCHIVE_BYTES",
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "MAX_LINE_BYTES",
    "MAX_NUMBER_CHARS",
    "RUN_DIR_FILES",
    "RUN_DIR_PATTERNS",
    "STDOUT",
    "JSONLine",
    "atomic_output",
    "atomic_write",
    "bounded_lines",
    "check_output",
    "input_limits",
    "parse_json_line",
    "read_json_lines",
    "read_text_bounded",
    "writes_in_place",
]

MAX_DEPTH = 200
"""Deepest nesting of arrays/objects accepted in one line (real records nest a few levels)."""

MAX_NUMBER_CHARS = 400
"""Longest number literal accepted (Python refuses integers over 4,300 digits; real data never come close)."""

MAX_LINE_BYTES = 16 * 1024 * 1024
"""Longest JSON line read (16 MiB; a record with a long answer is a few KB). Environment variable
``PROMPTGRID_MAX_LINE_BYTES`` raises it; ``read_json_lines(max_line_bytes=...)`` too."""

MAX_FILE_BYTES = 4 * 1024 * 1024 * 1024
"""Largest JSONL input read (4 GiB). Environment variable ``PROMPTGRID_MAX_FILE_BYTES`` raises it;
``read_json_lines(max_file_bytes=...)`` too."""

MAX_ARCHIVE_BYTES = 256 * 1024 * 1024
"""Largest file read out of an archive (a bfcl-eval wheel given as ``--bfcl-data``), by its expanded size as the
archive declares it, checked before a byte is decompressed (bfcl-eval's largest data file is about 4 MB).
Environment variable ``PROMPTGRID_MAX_ARCHIVE_BYTES`` raises it."""

LINE_BYTES_ENV = "PROMPTGRID_MAX_LINE_BYTES"
FILE_BYTES_ENV = "PROMPTGRID_MAX_FILE_BYTES"
ARCHIVE_BYTES_ENV = "PROMPTGRID_MAX_ARCHIVE_BYTES"

STDOUT = "-"
"""The output path that means standard output."""

RUN_DIR_FILES = ("store.sqlite3", "store.sqlite3-wal", "store.sqlite3-shm", "store.sqlite3-journal",
                 "run.json", "run.lock", "conversations.sqlite3", "conversations.sqlite3-wal",
                 "conversations.sqlite3-shm", "conversations.sqlite3-journal")
"""A run directory's own files (``running.store.STORE_FILE``, its SQLite journals, ``run.json``, the lock; a
conversation run's ``conversations.sqlite3`` and its journals)."""

_STORES = ("store.sqlite3", "conversations.sqlite3")
"""The files that make a directory a run directory (single-turn, conversations)."""

RUN_DIR_PATTERNS = ("spill-*.jsonl",)
"""A run directory's own files by name pattern: ``running.store.SPILL_GLOB``, the answers a full disk kept
out of the store, which the next run stores (and deletes): an output there would be read back as answers."""

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class _Bad(ValueError):
    """A line breaks a bound; the message says which."""


def _constant(name: str) -> Any:
    raise _Bad(f"{name} is not a JSON number (write a finite number, or null)")


def _number(text: str, convert: type) -> Any:
    if len(text) > MAX_NUMBER_CHARS:
        raise _Bad(f"a number has {len(text)} characters (at most {MAX_NUMBER_CHARS})")
    value = convert(text)
    if isinstance(value, float) and not math.isfinite(value):
        raise _Bad(f"the number {text[:20]} is out of range (too large for a float)")
    return value


def _parse_int(text: str) -> int:
    return _number(text, int)


def _parse_float(text: str) -> float:
    return _number(text, float)


_DECODER = json.JSONDecoder(parse_constant=_constant, parse_int=_parse_int, parse_float=_parse_float)


def _check_depth(value: Any) -> None:
    """Refuse a parsed value nested deeper than ``MAX_DEPTH`` (iterative: no recursion on hostile data)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _Bad(f"nested more than {MAX_DEPTH} levels deep")
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))


def parse_json_line(text: str) -> Any:
    """Parse one JSON value within the bounds above; raises ``ValueError`` with a one-line reason.

    No scan of the text before parsing: one prebuilt decoder (``json.loads`` with keyword arguments
    builds a new one per call, which costs more than the parse of a short line) whose hooks refuse
    NaN/Infinity and check each number literal as the C scanner meets it (a cost per number, not per
    character); the parser's own RecursionError and ValueError become the bounded errors afterwards.
    The depth walk runs only for a line with more than ``MAX_DEPTH`` brackets, the surrogate check only
    for a line with a ``\\u`` escape.
    """
    try:
        value = _DECODER.decode(text)
    except _Bad:
        raise
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:  # the C parser's own guard, far below any stack overflow
        raise _Bad(f"nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as exc:  # int() limits
        raise ValueError(f"not valid JSON ({str(exc).splitlines()[0][:100]})") from None
    if isinstance(value, (dict, list)) and len(text) > 2 * MAX_DEPTH and \
            text.count("[") + text.count("{") > MAX_DEPTH:
        _check_depth(value)  # only a line with that many brackets can nest that deep
    if "\\u" in text and _SURROGATE_ESCAPE.search(text):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("a string holds an unpaired surrogate escape (\\ud800-\\udfff)") from None
    return value


@dataclass(frozen=True)
class JSONLine:
    """One non-blank line of a JSONL input: its 1-based number and value, or why it was refused."""

    number: int
    value: Any = None
    error: str | None = None


def _env_limit(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        value = 0
    if value <= 0:
        raise InputLimitError(f"{name}={raw[:40]!r} is not a positive number of bytes; set it to one "
                              f"(default {default}) or unset it.")
    return value


def input_limits(max_line_bytes: int | None = None, max_file_bytes: int | None = None) -> tuple[int, int]:
    """The (line, file) byte bounds of a read: the arguments, else the environment variables
    ``PROMPTGRID_MAX_LINE_BYTES`` / ``PROMPTGRID_MAX_FILE_BYTES``, else ``MAX_LINE_BYTES`` / ``MAX_FILE_BYTES``."""
    line = max_line_bytes if max_line_bytes is not None else _env_limit(LINE_BYTES_ENV, MAX_LINE_BYTES)
    size = max_file_bytes if max_file_bytes is not None else _env_limit(FILE_BYTES_ENV, MAX_FILE_BYTES)
    return line, size


def archive_limit() -> int:
    """The bound on one archive member's expanded size: ``PROMPTGRID_MAX_ARCHIVE_BYTES``, else ``MAX_ARCHIVE_BYTES``."""
    return _env_limit(ARCHIVE_BYTES_ENV, MAX_ARCHIVE_BYTES)


def member_too_large(where: str, size: int, limit: int) -> InputLimitError:
    return InputLimitError(f"{where}: expands to {size} bytes, more than {_size(limit)}, the bound for a file read "
                           f"out of an archive; if it is what you meant, set {ARCHIVE_BYTES_ENV} to more bytes.")


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} bytes"


def line_too_long(where: str, number: int, limit: int) -> InputLimitError:
    return InputLimitError(f"{where}:{number}: the line is longer than {_size(limit)}, the bound for one JSON line; "
                           f"if the file is what you meant, set {LINE_BYTES_ENV} to more bytes.")


def file_too_large(where: str, limit: int) -> InputLimitError:
    return InputLimitError(f"{where}: the input is larger than {_size(limit)}, the bound for one JSONL file; "
                           f"if it is what you meant, set {FILE_BYTES_ENV} to more bytes (or split the file).")


def _where(stream: Any, name: str | os.PathLike[str] | None) -> str:
    if name is not None:
        return os.fspath(name)
    given = getattr(stream, "name", None)
    return given if isinstance(given, str) else "input"


def check_size(stream: Any, where: str, limit: int) -> None:
    """Refuse up front a regular file (``stream`` has a ``fileno``) larger than ``limit`` bytes."""
    try:
        st = os.fstat(stream.fileno())
    except (AttributeError, OSError, ValueError):  # no descriptor (BytesIO), or io.UnsupportedOperation
        return
    if stat.S_ISREG(st.st_mode) and st.st_size > limit:
        raise file_too_large(where, limit)


@overload
def bounded_lines(stream: Iterable[bytes], *, max_line_bytes: int | None = None, max_file_bytes: int | None = None,
                  name: str | os.PathLike[str] | None = None) -> Iterator[bytes]: ...
@overload
def bounded_lines(stream: Iterable[str], *, max_line_bytes: int | None = None, max_file_bytes: int | None = None,
                  name: str | os.PathLike[str] | None = None) -> Iterator[str]: ...
@overload
def bounded_lines(stream: Iterable[bytes] | Iterable[str], *, max_line_bytes: int | None = None,
                  max_file_bytes: int | None = None,
                  name: str | os.PathLike[str] | None = None) -> Iterator[bytes | str]: ...
def bounded_lines(stream: Iterable[bytes] | Iterable[str], *, max_line_bytes: int | None = None,
                  max_file_bytes: int | None = None,
                  name: str | os.PathLike[str] | None = None) -> Iterator[bytes | str]:
    """The lines of ``stream`` (line ends kept), each at most ``max_line_bytes`` and all together at most
    ``max_file_bytes`` (``input_limits``), else ``InputLimitError`` naming ``name`` (or the stream's name)
    and the line. A stream with ``readline`` is read with ``readline(limit + 1)``: a line without an end
    (``/dev/zero``) costs one bounded read, never the whole file."""
    line_limit, file_limit = input_limits(max_line_bytes, max_file_bytes)
    where = _where(stream, name)
    check_size(stream, where, file_limit)
    readline = getattr(stream, "readline", None)
    total = 0
    number = 0
    if readline is not None:
        cap = line_limit + 1
        while raw := readline(cap):
            number += 1
            total += len(raw)
            if len(raw) > line_limit and not (len(raw) == cap and raw[-1:] in (b"\n", "\n")):
                raise line_too_long(where, number, line_limit)
            if total > file_limit:
                raise file_too_large(where, file_limit)
            yield raw
        return
    for raw in stream:
        number += 1
        total += len(raw)
        if len(raw) > line_limit + 1 or (len(raw) == line_limit + 1 and raw[-1:] not in (b"\n", "\n")):
            raise line_too_long(where, number, line_limit)
        if total > file_limit:
            raise file_too_large(where, file_limit)
        yield raw


def read_json_lines(stream: Iterable[bytes] | Iterable[str], *, max_line_bytes: int | None = None,
                    max_file_bytes: int | None = None, name: str | os.PathLike[str] | None = None,
                    objects: bool = False) -> Iterator[JSONLine]:
    """Each non-blank line of ``stream`` parsed on its own; blank lines are skipped.

    Give a binary stream (``open(path, "rb")``, ``sys.stdin.buffer``) so that
    invalid UTF-8 is reported for its line instead of stopping the whole read;
    a text stream works too (its bounds count characters). A UTF-8 byte-order
    mark on line 1 is ignored. Lines are read by ``bounded_lines``: a line over
    ``max_line_bytes`` or an input over ``max_file_bytes`` stops the read with
    ``InputLimitError`` (defaults: ``input_limits``; ``name`` names the input in
    that message, else the stream's ``name``). ``objects``: a line whose value is
    not a JSON object is refused too (its ``error`` says what it is instead).
    """
    lines = bounded_lines(stream, max_line_bytes=max_line_bytes, max_file_bytes=max_file_bytes, name=name)
    for number, raw in enumerate(lines, start=1):
        if isinstance(raw, bytes):
            try:
                text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                yield JSONLine(number, error=f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at byte {exc.start + 1}); "
                                             "save the file as UTF-8")
                continue
        else:
            text = raw.removeprefix("\ufeff") if number == 1 else raw
        if not text.strip():
            continue
        try:
            value = parse_json_line(text.rstrip("\r\n"))  # errors point into the line itself
        except ValueError as exc:
            yield JSONLine(number, error=str(exc))
            continue
        if objects and not isinstance(value, dict):
            yield JSONLine(number, error=f"expected a JSON object, got {type(value).__name__}")
        else:
            yield JSONLine(number, value)


def read_text_bounded(path: str | os.PathLike[str], *, limit: int | None = None) -> str:
    """A file read whole as UTF-8 (one JSON document, such as ``run.json``): at most ``limit`` bytes (default:
    the line bound, ``input_limits()[0]``), else ``InputLimitError``. ``OSError`` and ``UnicodeDecodeError``
    (a ``ValueError``) are the caller's to report."""
    bound = limit if limit is not None else input_limits()[0]
    with open(path, "rb") as handle:
        data = handle.read(bound + 1)
    if len(data) > bound:
        raise InputLimitError(f"{os.fspath(path)}: larger than {_size(bound)}, the bound for a file read whole; "
                              f"if it is what you meant, set {LINE_BYTES_ENV} to more bytes.")
    return data.decode("utf-8")


# --------------------------------------------------------------------------- outputs


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a.resolve() == b.resolve()


def _is_stdout(path: str | os.PathLike[str]) -> bool:
    return isinstance(path, str) and path == STDOUT


def check_output(path: str | os.PathLike[str], *, inputs: Iterable[str | os.PathLike[str]] = ()) -> Path:
    """``path`` as a Path, or ``OutputError`` when writing it would destroy an input or a run's store.

    Refused: one of ``inputs`` (also through a link or another spelling), a
    directory, and a run directory's own files (``RUN_DIR_FILES`` and
    ``RUN_DIR_PATTERNS`` in a directory that holds a ``store.sqlite3``).
    ``-`` (standard output) is accepted as it is.
    """
    target = Path(path)
    if _is_stdout(path):
        return target
    for given in inputs:
        if os.fspath(given) == STDOUT:
            continue
        if _same(target, Path(given)):
            raise OutputError(f"output {target} is the input file {given}; writing it would destroy the input. "
                              "Give another --output path.")
    resolved = target.resolve()
    if resolved.is_dir():
        raise OutputError(f"output {target} is a directory; give a file path.")
    own = resolved.name in RUN_DIR_FILES or any(fnmatch.fnmatchcase(resolved.name, p) for p in RUN_DIR_PATTERNS)
    if own and any((resolved.parent / store).exists() for store in _STORES):
        raise OutputError(f"output {target} is a file of the run directory {resolved.parent}; writing it would "
                          "destroy the run. Give a path outside the run's own files (e.g. RUN_DIR/results.jsonl).")
    if not _is_stream(target) and not resolved.parent.is_dir():
        raise OutputError(f"cannot write {target}: directory {target.parent} does not exist; create it first.")
    return target


def _is_stream(target: Path) -> bool:
    """Whether ``target`` exists and is not a regular file (a FIFO, a device, a socket, ``/dev/stdout`` on a
    pipe), or names an open descriptor (``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``): written in place."""
    try:
        st = os.stat(target)  # follows links, /proc's descriptor links included
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode):
        return True
    real = os.path.realpath(target)
    return real.startswith("/proc/") or os.fspath(target).startswith(("/dev/fd/", "/dev/std", "/proc/"))


def writes_in_place(path: str | os.PathLike[str]) -> bool:
    """Whether ``atomic_output(path)`` writes in place as a stream (``-``, a FIFO, a device, a descriptor) rather
    than through a temporary file renamed over a regular file."""
    return _is_stdout(path) or _is_stream(Path(path))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _write_error(target: Any, exc: OSError) -> OutputError:
    return OutputError(f"cannot write {target}: {exc.strerror or exc}. Nothing more was written; free space or "
                       "give another output path.")


class _Sink:
    """A file object whose write errors are ``OutputError`` naming the target (other attributes pass through)."""

    def __init__(self, handle: IO[Any], target: Any) -> None:
        self._handle = handle
        self._target = target

    def write(self, data: Any) -> int:
        try:
            return self._handle.write(data)
        except OSError as exc:
            raise _write_error(self._target, exc) from None

    def writelines(self, lines: Iterable[Any]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._handle.flush()
        except OSError as exc:
            raise _write_error(self._target, exc) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)


@contextmanager
def atomic_output(path: str | os.PathLike[str], *, inputs: Iterable[str | os.PathLike[str]] = (),
                  binary: bool = False, fsync: bool = False) -> Iterator[IO[Any]]:
    """A stream for ``path`` whose content replaces a regular file only when the ``with`` block ends without
    error.

    ``path`` is checked first (``check_output``). A new path, a regular file or
    a symlink to one: the content goes to a temporary file in the real file's
    directory and is renamed over the real file (the old file stays whole until
    the new one is complete and is kept if anything fails; a symlink stays a
    symlink; an existing file's permissions are kept). ``-``, a FIFO, a device
    or an open descriptor (``/dev/stdout``): written in place as a stream. A
    failed write, flush, ``fsync`` or close raises ``OutputError``.
    """
    target = check_output(path, inputs=inputs)
    if _is_stdout(path):
        yield from _stdout_output(binary)
        return
    if _is_stream(target):
        yield from _stream_output(target, binary)
        return
    real = Path(os.path.realpath(target))
    try:
        mode = stat.S_IMODE(os.stat(real).st_mode)
    except OSError:
        mode = 0o666 & ~_umask()  # mkstemp makes 0600; give a new file the mode open() would
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".tmp", dir=real.parent)
    except OSError as exc:
        raise OutputError(f"cannot write {target}: {exc.strerror or exc}.") from None
    try:
        handle = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="\n")
        try:
            os.chmod(tmp, mode)
            yield _Sink(handle, target)  # type: ignore[misc]
            try:
                handle.flush()
                if fsync:
                    os.fsync(handle.fileno())
            except OSError as exc:
                raise _write_error(target, exc) from None
        finally:
            try:
                handle.close()
            except OSError as exc:
                raise _write_error(target, exc) from None
        try:
            os.replace(tmp, real)
        except OSError as exc:
            raise OutputError(f"cannot write {target}: {exc.strerror or exc}.") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _stream_output(target: Path, binary: bool) -> Iterator[IO[Any]]:
    """Write a FIFO, a device or a descriptor in place (opened for writing: never created, replaced or removed)."""
    try:
        fd = os.open(target, os.O_WRONLY | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise OutputError(f"cannot write {target}: {exc.strerror or exc}.") from None
    handle = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="\n")
    ok = False
    try:
        yield _Sink(handle, target)  # type: ignore[misc]
        ok = True
    finally:
        try:
            handle.close()  # flushes
        except OSError as exc:
            if ok:
                raise _write_error(target, exc) from None


def _stdout_output(binary: bool) -> Iterator[IO[Any]]:
    """Standard output (``-``): written as it comes, flushed at the end, never closed."""
    handle = sys.stdout.buffer if binary else sys.stdout
    yield _Sink(handle, "standard output")  # type: ignore[misc]
    try:
        handle.flush()
    except OSError as exc:
        raise _write_error("standard output", exc) from None


def atomic_write(path: str | os.PathLike[str], content: str | bytes, *,
                 inputs: Iterable[str | os.PathLike[str]] = ()) -> Path:
    """Write ``content`` to ``path`` through ``atomic_output``; returns the path."""
    try:
        with atomic_output(path, inputs=inputs, binary=isinstance(content, bytes)) as handle:
            handle.write(content)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}.") from None
    return Path(path)
