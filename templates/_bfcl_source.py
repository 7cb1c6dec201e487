"""Find bfcl-eval's files and read them as text, without importing bfcl-eval.

promptgrid reads two things from bfcl-eval at run time: its data files
(questions, possible answers, the 200 format-sensitivity ids; used by
``promptgrid.matrix.datasets``) and its own experimental prompt wording (the
``experimental_bfcl`` style). Importing ``bfcl_eval`` pulls dozens of provider
SDKs and creates folders inside the installed package, so we never import it:
we locate its files and read them.

Where bfcl-eval can be, in the order they are tried:

1. an explicit path (``--bfcl-data PATH``), else
2. the ``PROMPTGRID_BFCL_DATA`` environment variable, else
3. an installed ``bfcl_eval`` package (found with ``importlib.util.find_spec``,
   which does not run the package).

A path may be a wheel (``bfcl_eval-*.whl``, read as a zip), the ``bfcl_eval``
package folder itself, a folder that contains it (site-packages, an unpacked
wheel), a gorilla checkout (``berkeley-function-call-leaderboard/bfcl_eval``),
or just the data folder (``BFCL_v4_*.json`` files, with ``possible_answer/``).

Paths given to :meth:`BfclSource.read_text` are relative to the ``bfcl_eval``
package folder, e.g. ``data/BFCL_v4_simple_python.json`` or
``constants/default_prompts.py``.
"""

from __future__ import annotations

import ast
import os
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from importlib.util import find_spec as _find_spec
from pathlib import Path
from typing import IO, Any

from promptgrid.errors import InputLimitError, PromptgridError
from promptgrid.safeio import LINE_BYTES_ENV, archive_limit, input_limits, member_too_large

__all__ = [
    "BFCL_DATA_ENV",
    "BFCL_INSTALL_HINT",
    "BfclSource",
    "find_bfcl",
    "read_bfcl_assignments",
]

BFCL_DATA_ENV = "PROMPTGRID_BFCL_DATA"
BFCL_INSTALL_HINT = (
    "Install it with: pip install --no-deps bfcl-eval, or point promptgrid at a wheel, "
    f"a folder or a gorilla checkout with --bfcl-data PATH (or {BFCL_DATA_ENV}=PATH)"
)
_PACKAGE = "bfcl_eval"
_GORILLA_SUBDIR = "berkeley-function-call-leaderboard"


@dataclass(frozen=True)
class BfclSource:
    """Where bfcl-eval's files are: a folder (``root``) or a zip (``archive``).

    ``root`` is the ``bfcl_eval`` package folder, or the member prefix inside
    the archive (``bfcl_eval/``). ``data_only`` marks a bare data folder: then
    ``data/<file>`` maps to ``<root>/<file>`` and nothing else exists.
    """

    root: str
    archive: str | None = None
    data_only: bool = False

    def describe(self) -> str:
        return f"{self.archive}!{self.root}" if self.archive else self.root

    def _member(self, relpath: str) -> str | None:
        rel = relpath.strip("/")
        if self.data_only:
            if not rel.startswith("data/"):
                return None
            rel = rel[len("data/"):]
        return f"{self.root.rstrip('/')}/{rel}" if self.root else rel

    def exists(self, relpath: str) -> bool:
        member = self._member(relpath)
        if member is None:
            return False
        if self.archive:
            return member in _zip_names(self.archive)
        return Path(member).is_file()

    def where(self, relpath: str) -> str:
        """``relpath`` as messages name it: ``ARCHIVE!bfcl_eval/data/...`` or the file's path."""
        member = self._member(relpath) or relpath.strip("/")
        return f"{self.archive}!{member}" if self.archive else member

    @contextmanager
    def open_binary(self, relpath: str) -> Iterator[IO[bytes]]:
        """The file as a binary stream (with ``readline``), read as it is consumed. An archive member is refused
        (``InputLimitError``) before a byte is decompressed when its expanded size is over ``MAX_ARCHIVE_BYTES``.
        Raises ``FileNotFoundError`` if it is absent."""
        member = self._member(relpath)
        if member is None or not self.exists(relpath):
            raise FileNotFoundError(f"{relpath} is not in bfcl-eval at {self.describe()}")
        if self.archive:
            with zipfile.ZipFile(self.archive) as zf:
                info = zf.getinfo(member)
                limit = archive_limit()
                if info.file_size > limit:
                    raise member_too_large(self.where(relpath), info.file_size, limit)
                with zf.open(info) as handle:  # yields at most the declared size
                    yield handle
        else:
            with open(member, "rb") as handle:
                yield handle

    def read_text(self, relpath: str) -> str:
        """The whole file's text (UTF-8), a document read at once (``default_prompts.py``, a JSON listing):
        at most ``safeio.MAX_LINE_BYTES`` (the bound for one record; ``PROMPTGRID_MAX_LINE_BYTES``), else
        ``InputLimitError``. Raises ``FileNotFoundError`` if it is absent, ``ValueError`` naming the file
        when it is not UTF-8."""
        limit, _ = input_limits()
        with self.open_binary(relpath) as handle:
            data = handle.read(limit + 1)
        if len(data) > limit:
            raise InputLimitError(f"{self.where(relpath)}: larger than {limit} bytes, the bound for a file read "
                                  f"whole; if it is what you meant, set {LINE_BYTES_ENV} to more bytes.")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{self.where(relpath)} is not UTF-8 text (byte 0x{data[exc.start]:02x} at byte "
                             f"{exc.start + 1}); point --bfcl-data at an unmodified bfcl-eval") from None

    def list_dir(self, reldir: str) -> list[str]:
        """File names directly inside ``reldir`` (sorted)."""
        member = self._member(reldir.rstrip("/") + "/x")
        if member is None:
            return []
        prefix = member[:-1]
        if self.archive:
            names = {n[len(prefix):] for n in _zip_names(self.archive) if n.startswith(prefix)}
            return sorted(n for n in names if n and "/" not in n)
        folder = Path(prefix)
        return sorted(p.name for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []


@lru_cache(maxsize=8)
def _zip_names(archive: str) -> frozenset[str]:
    with zipfile.ZipFile(archive) as zf:
        return frozenset(zf.namelist())


def _from_path(path: Path) -> BfclSource | None:
    if path.is_file() and zipfile.is_zipfile(path):
        names = _zip_names(str(path))
        for name in sorted(names, key=len):
            if name.endswith(f"{_PACKAGE}/constants/default_prompts.py"):
                prefix = name[: -len("/constants/default_prompts.py")]
                return BfclSource(root=prefix, archive=str(path))
        return None
    if not path.is_dir():
        return None
    candidates = [path, path / _PACKAGE, path / _GORILLA_SUBDIR / _PACKAGE]
    for folder in candidates:
        has_prompts = (folder / "constants" / "default_prompts.py").is_file()
        is_package_with_data = (folder / "__init__.py").is_file() and (folder / "data").is_dir()
        if has_prompts or is_package_with_data:
            return BfclSource(root=str(folder))
    if any(path.glob("BFCL_v*_*.json")):
        return BfclSource(root=str(path), data_only=True)
    return None


def find_bfcl(
    bfcl_data: str | os.PathLike[str] | None = None,
    *,
    error: type[PromptgridError] = PromptgridError,
) -> BfclSource | None:
    """Locate bfcl-eval: the explicit path, else ``$PROMPTGRID_BFCL_DATA``, else the installed package.

    Returns ``None`` when nothing was asked for explicitly and no installed
    package exists. A path that was given (argument or environment variable)
    but holds no bfcl-eval raises ``error`` (the caller's error class, so the
    CLI reports it as a dataset or template problem).
    """
    for given, origin in ((bfcl_data, "--bfcl-data"), (os.environ.get(BFCL_DATA_ENV) or None, BFCL_DATA_ENV)):
        if given is None:
            continue
        path = Path(given).expanduser()
        if not path.exists():
            raise error(f"{origin}: {path} does not exist. {BFCL_INSTALL_HINT}.")
        source = _from_path(path)
        if source is None:
            raise error(
                f"{origin}: {path} holds no bfcl-eval files (expected a bfcl_eval wheel, the bfcl_eval "
                f"package folder, a gorilla checkout or a folder of BFCL_v4_*.json files). {BFCL_INSTALL_HINT}."
            )
        return source
    spec = _find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        if Path(location).is_dir():
            return BfclSource(root=str(location))
    return None


def read_bfcl_assignments(source: BfclSource, relpath: str, names: tuple[str, ...]) -> dict[str, Any]:
    """Literal values of top-level assignments ``NAME = <literal>`` in a bfcl-eval module.

    The module is parsed, never run: each wanted right-hand side goes through
    ``ast.literal_eval``. Names that are absent (or not literals) are left out.
    Raises ``FileNotFoundError``, ``SyntaxError``, ``ValueError`` (not UTF-8) or
    ``InputLimitError`` (larger than the bound), each naming the file.
    """
    try:
        tree = ast.parse(source.read_text(relpath), filename=relpath)
    except (RecursionError, MemoryError):  # the parser's own guards on deep nesting
        raise SyntaxError(f"{source.where(relpath)} is nested too deeply to be bfcl-eval's source") from None
    out: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
            value = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            targets, value = [node.target.id], node.value
        else:
            continue
        for name in targets:
            if name in names:
                try:
                    out[name] = ast.literal_eval(value)
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    continue
    return out
