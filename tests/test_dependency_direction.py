"""Dependency direction: root <- variants <- templates <- translate <- matrix, with no import of a higher layer.

Checked on the source (every ``import``, including those inside functions and
under ``TYPE_CHECKING``), so a lazy import that would make a cycle fails here
before it fails anyone at run time. The package facade ``promptgrid/__init__.py``
sits above everything by design (it re-exports the public API lazily) and is
not checked.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# folder -> (package, layer); the package root's own modules are layer 0
LAYERS = {"promptgrid": ("promptgrid", 0), "variants": ("promptgrid.variants", 1),
          "templates": ("promptgrid.templates", 2), "translate": ("promptgrid.translate", 3),
          "matrix": ("promptgrid.matrix", 4)}


def _layer_of(module: str) -> int | None:
    """Layer of an absolute ``promptgrid...`` module name (``None``: not promptgrid's)."""
    if module != "promptgrid" and not module.startswith("promptgrid."):
        return None
    best = 0
    for package, layer in LAYERS.values():
        if module == package or module.startswith(package + "."):
            best = max(best, layer)
    return best


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every promptgrid import in ``path`` (relative imports stay inside a layer)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            found += [(node.lineno, name) for name in names]
    return found


def _sources() -> list[tuple[Path, int]]:
    out = []
    for folder, (_, layer) in LAYERS.items():
        if folder == "promptgrid":
            out += [(p, layer) for p in sorted((ROOT / folder).glob("*.py")) if p.name != "__init__.py"]
        else:
            out += [(p, layer) for p in sorted((ROOT / folder).rglob("*.py"))]
    return out


def test_no_import_of_a_higher_layer() -> None:
    upward = [f"{path.relative_to(ROOT)}:{line} imports {module}"
              for path, layer in _sources() for line, module in _imports(path)
              if (target := _layer_of(module)) is not None and target > layer]
    assert len(_sources()) > 50
    assert not upward, "imports of a higher layer:\n" + "\n".join(upward)
