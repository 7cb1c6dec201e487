"""Bounded reading of untrusted JSON lines, and output files that never destroy an input or a run's store.

Every command that reads a JSONL file a user names (``jsonl:`` datasets,
``score-file``, ``check-translation --jsonl``, exported results) reads it with
``read_json_lines``: each line is decoded and parsed on its own, within bounds
(nesting depth, digits per number, finite numbers only, valid UTF-8), and a bad
line becomes a ``JSONLine`` with an ``error`` instead of an exception, so the
caller reports ``file:line`` and goes on with the other lines. Hostile input
(100,000 nested brackets, a 5,000-digit integer, NaN, stray bytes) thus costs one
message, never a traceback.

Every command that writes a file a user names (``score-file --output``,
``export --output``, ``report``/``compare --out``) writes it with
``atomic_output`` or ``atomic_write``: the path is refused when it is one of the
command's inputs or a run directory's own files (``store.sqlite3``, its journal,
``run.json``, ``run.lock``, the ``spill-*.jsonl`` answers a full disk left), and
the content goes to a temporary file in the same directory, renamed over the
target only when complete, so a failure never leaves half a file and never
truncates what is being read.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from promptgrid.errors import OutputError

__all__ = [
    "MAX_DEPTH",
    "MAX_NUMBER_CHARS",
    "RUN_DIR_FILES",
    "RUN_DIR_PATTERNS",
    "JSONLine",
    "atomic_output",
    "atomic_write",
    "check_output",
    "parse_json_line",
    "read_json_lines",
]

MAX_DEPTH = 200
"""Deepest nesting of arrays/objects accepted in one line (real records nest a few levels)."""

MAX_NUMBER_CHARS = 400
"""Longest number literal accepted (Python refuses integers over 4,300 digits; real data never come close)."""

RUN_DIR_FILES = ("store.sqlite3", "store.sqlite3-wal", "store.sqlite3-shm", "store.sqlite3-journal",
                 "run.json", "run.lock")
"""A run directory's own files (``running.store.STORE_FILE``, its SQLite journals, ``run.json``, the lock)."""

RUN_DIR_PATTERNS = ("spill-*.jsonl",)
"""A run directory's own files by name pattern: ``running.store.SPILL_GLOB``, the answers a full disk kept
out of the store, which the next run stores (and deletes): an output there would be read back as answers."""

# Number literals that need the careful parse: long digit runs, or exponents that may overflow to inf.
_RISKY_NUMBER = re.compile(r"(?<!\d)\d{%d}|[eE][+-]?\d{3}" % (MAX_NUMBER_CHARS + 1))
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
    """Parse one JSON value within the bounds above; raises ``ValueError`` with a one-line reason."""
    try:
        if _RISKY_NUMBER.search(text):
            value = json.loads(text, parse_constant=_constant, parse_int=_parse_int, parse_float=_parse_float)
        else:
            value = json.loads(text, parse_constant=_constant)
    except _Bad:
        raise
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:  # the C parser's own guard, far below any stack overflow
        raise _Bad(f"nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as exc:  # int() limits
        raise ValueError(f"not valid JSON ({str(exc).splitlines()[0][:100]})") from None
    if isinstance(value, (dict, list)) and text.count("[") + text.count("{") > MAX_DEPTH:
        _check_depth(value)  # only a line with that many brackets can nest that deep
    if _SURROGATE_ESCAPE.search(text):
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


def read_json_lines(stream: Iterable[bytes] | Iterable[str]) -> Iterator[JSONLine]:
    """Each non-blank line of ``stream`` parsed on its own; blank lines are skipped.

    Give a binary stream (``open(path, "rb")``, ``sys.stdin.buffer``) so that
    invalid UTF-8 is reported for its line instead of stopping the whole read;
    a text stream works too. A UTF-8 byte-order mark on line 1 is ignored.
    """
    for number, raw in enumerate(stream, start=1):
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
            yield JSONLine(number, parse_json_line(text.rstrip("\r\n")))  # errors point into the line itself
        except ValueError as exc:
            yield JSONLine(number, error=str(exc))


# --------------------------------------------------------------------------- outputs


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a.resolve() == b.resolve()


def check_output(path: str | os.PathLike[str], *, inputs: Iterable[str | os.PathLike[str]] = ()) -> Path:
    """``path`` as a Path, or ``OutputError`` when writing it would destroy an input or a run's store.

    Refused: one of ``inputs`` (also through a link or another spelling), a
    directory, and a run directory's own files (``RUN_DIR_FILES`` and
    ``RUN_DIR_PATTERNS`` in a directory that holds a ``store.sqlite3``).
    """
    target = Path(path)
    for given in inputs:
        if _same(target, Path(given)):
            raise OutputError(f"output {target} is the input file {given}; writing it would destroy the input. "
                              "Give another --output path.")
    resolved = target.resolve()
    if resolved.is_dir():
        raise OutputError(f"output {target} is a directory; give a file path.")
    own = resolved.name in RUN_DIR_FILES or any(fnmatch.fnmatchcase(resolved.name, p) for p in RUN_DIR_PATTERNS)
    if own and (resolved.parent / RUN_DIR_FILES[0]).exists():
        raise OutputError(f"output {target} is a file of the run directory {resolved.parent}; writing it would "
                          "destroy the run. Give a path outside the run's own files (e.g. RUN_DIR/results.jsonl).")
    if not resolved.parent.is_dir():
        raise OutputError(f"cannot write {target}: directory {target.parent} does not exist; create it first.")
    return target


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_output(path: str | os.PathLike[str], *, inputs: Iterable[str | os.PathLike[str]] = (),
                  binary: bool = False) -> Iterator[IO[Any]]:
    """A stream whose content replaces ``path`` only when the ``with`` block ends without error.

    ``path`` is checked first (``check_output``); the content is written to a
    temporary file in the same directory and renamed over ``path``, so the old
    file stays whole until the new one is complete, and is kept if anything fails.
    """
    target = check_output(path, inputs=inputs)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise OutputError(f"cannot write {target}: {exc.strerror or exc}.") from None
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the mode open() would
        with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="\n")) as handle:
            yield handle
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write(path: str | os.PathLike[str], content: str | bytes, *,
                 inputs: Iterable[str | os.PathLike[str]] = ()) -> Path:
    """Write ``content`` to ``path`` through ``atomic_output``; returns the path."""
    try:
        with atomic_output(path, inputs=inputs, binary=isinstance(content, bytes)) as handle:
            handle.write(content)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}.") from None
    return Path(path)
