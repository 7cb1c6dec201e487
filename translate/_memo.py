"""Check results kept between commands: the same translation is not checked twice by the same code.

``promptgrid check-translations`` checks every shipped catalog entry (2,264 of
them) and ``promptgrid translate --backend catalog`` every entry it stores;
the checks need the language-identification model (1.2 s to load) and take
about a second more. Their result depends only on the inputs of
:func:`~._check.check_translation` (source, translation, the two languages,
the protected names) and on the code that checks, so it is kept:

- in ``$XDG_CACHE_HOME/promptgrid/checks-<fingerprint>.json`` (else
  ``~/.cache/...``, next to the default translation store), one JSON object
  ``{key: [problems, details]}``, the key a hash of the inputs;
- the fingerprint hashes the checking code (``_check.py``, ``_protect.py``,
  ``promptgrid/languages.py``) and the language model's file, so a changed
  check never reads an old result; files of other fingerprints are removed
  when one is written;
- only results whose details come back equal from JSON are kept, at most
  ``MAX_ENTRIES``; back-translation scores (a backend's answer) never are.

The file is read once per process, written (atomically: a temporary file
renamed) by :meth:`CheckMemo.flush` when something was added. A cache that
cannot be read or written is ignored: the checks run as they would without
it. The file is data: parsed as JSON and checked entry by entry.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from . import _check, _protect
from ._check import CheckCode, TranslationCheck, check_translation

__all__ = ["MAX_ENTRIES", "CheckMemo", "memo"]

MAX_ENTRIES = 100_000
"""The most results kept (a few hundred bytes each); past it new results are not added."""

_CODES = {c.value: c for c in CheckCode}


def _fingerprint() -> str:
    """A hash of the code the results depend on (and of the language model's file, by size and time)."""
    from promptgrid import languages

    digest = hashlib.sha256()
    for module in (_check, _protect, languages):
        with contextlib.suppress(OSError, TypeError):
            digest.update(Path(str(module.__file__)).read_bytes())
    spec = importlib.util.find_spec("langid")
    if spec is not None and spec.origin:
        folder = Path(spec.origin).parent
        for name in ("langid.py", "__init__.py"):
            with contextlib.suppress(OSError):
                stat = (folder / name).stat()
                digest.update(f"{name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:20]


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "promptgrid"


class CheckMemo:
    """``check_translation`` with its results kept in ``path`` (default: the user's cache, see the module
    docstring); :meth:`flush` writes what was added."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self._path = Path(path) if path is not None else None
        self._results: dict[str, list[Any]] | None = None
        self._added = False
        self._lock = threading.Lock()

    @property
    def path(self) -> Path:
        if self._path is None:
            self._path = _cache_dir() / f"checks-{_fingerprint()}.json"
        return self._path

    def _load(self) -> dict[str, list[Any]]:
        if self._results is None:
            results: dict[str, list[Any]] = {}
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                data = None
            if isinstance(data, dict):
                for key, value in data.items():
                    if (isinstance(value, list) and len(value) == 2 and isinstance(value[0], list)
                            and all(p in _CODES for p in value[0]) and isinstance(value[1], dict)):
                        results[key] = value
            self._results = results
        return self._results

    def check(self, source: str, translation: str, source_lang: str, target_lang: str,
              protected: Iterable[str] = (), *, back_translator: Any = None) -> TranslationCheck:
        """``check_translation``'s result, kept; with a ``back_translator`` it is always checked anew."""
        if back_translator is not None:
            return check_translation(source, translation, source_lang, target_lang, protected,
                                     back_translator=back_translator)
        names = [p for p in protected if isinstance(p, str)]
        key = hashlib.sha256(json.dumps([source, translation, source_lang, target_lang, names],
                                        ensure_ascii=False).encode("utf-8", "surrogatepass")).hexdigest()[:32]
        with self._lock:
            found = self._load().get(key)
        if found is not None:
            return TranslationCheck(not found[0], [_CODES[p] for p in found[0]], dict(found[1]))
        result = check_translation(source, translation, source_lang, target_lang, names)
        problems = [p.value for p in result.problems]
        try:
            kept = json.loads(json.dumps(result.details))
        except (TypeError, ValueError):
            return result
        with self._lock:
            results = self._load()
            if kept == result.details and len(results) < MAX_ENTRIES:
                results[key] = [problems, kept]
                self._added = True
        return result

    __call__ = check

    def flush(self) -> None:
        """Write the results added since the last flush (nothing when none was; errors are ignored)."""
        with self._lock:
            if not self._added or self._results is None:
                return
            self._added = False
            text = json.dumps(self._results, ensure_ascii=False, separators=(",", ":"))
        path = self.path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".checks-", suffix=".tmp", dir=path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(text)
                os.replace(tmp, path)
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            for old in path.parent.glob("checks-*.json"):
                if old != path:
                    with contextlib.suppress(OSError):
                        old.unlink()
        except OSError:
            return


_MEMOS: dict[str, CheckMemo] = {}


def memo() -> CheckMemo:
    """The process's memo of the user's cache (one per cache folder: tests change ``XDG_CACHE_HOME``)."""
    folder = str(_cache_dir())
    found = _MEMOS.get(folder)
    if found is None:
        found = _MEMOS[folder] = CheckMemo()
    return found
