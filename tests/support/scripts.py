"""The repository's own scripts (``benchmarks/``, ``scripts/``), loaded as modules for the tests that check them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_script(relative: str, name: str | None = None) -> ModuleType:
    """``ROOT/relative`` executed as a module named ``name`` (default: the file's stem), not left in
    ``sys.modules`` (a test may load it again, fresh)."""
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module
