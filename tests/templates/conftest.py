"""Fixtures for the template tests: builders and bfcl-eval itself as the reference.

bfcl-eval is installed with --no-deps, so ``bfcl_eval.model_handler.utils``
cannot be imported as is (it imports tree_sitter parsers and tenacity). The
``bfcl`` fixture executes that one file under a private module name, with
stand-ins for the missing modules present in ``sys.modules`` only while it
runs (``tests/bfcl_support.py``); nothing of bfcl-eval's is patched. bfcl-eval
creates folders under its project root when imported, so ``BFCL_PROJECT_ROOT``
points at a temp dir.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from promptgrid.records import Case


@dataclass
class BfclReference:
    utils: Any  # bfcl_eval.utils
    model_utils: Any  # bfcl_eval/model_handler/utils.py, loaded privately


def _bfcl_support() -> ModuleType:
    """tests/bfcl_support.py, loaded by path (``tests`` is not a package)."""
    path = Path(__file__).parents[1] / "bfcl_support.py"
    spec = importlib.util.spec_from_file_location("_promptgrid_bfcl_support", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def bfcl() -> Iterator[BfclReference]:
    """bfcl-eval's own functions (skips when bfcl-eval is not installed)."""
    if importlib.util.find_spec("bfcl_eval") is None:
        pytest.skip("bfcl-eval is not installed (pip install --no-deps bfcl-eval)")
    with tempfile.TemporaryDirectory(prefix="bfcl-root-") as root:
        old = os.environ.get("BFCL_PROJECT_ROOT")
        os.environ["BFCL_PROJECT_ROOT"] = root
        try:
            utils = importlib.import_module("bfcl_eval.utils")
            (model_utils,) = _bfcl_support().load_bfcl_modules("bfcl_eval.model_handler.utils")
            yield BfclReference(utils=utils, model_utils=model_utils)
        finally:
            if old is None:
                os.environ.pop("BFCL_PROJECT_ROOT", None)
            else:
                os.environ["BFCL_PROJECT_ROOT"] = old


def _make_case(
    functions: list[dict[str, Any]] | None = None,
    *,
    turns: list[dict[str, str]] | None = None,
    language: str = "en",
    case_id: str = "case_1",
) -> Case:
    """A small Case for template tests."""
    if functions is None:
        functions = [{
            "name": "math.factorial",
            "description": "Calculate the factorial of a given number.",
            "parameters": {
                "type": "dict",
                "properties": {
                    "number": {"type": "integer", "description": "The number for which factorial needs to be calculated."},
                    "mode": {"type": "string", "description": "How to compute.", "enum": ["fast", "exact"],
                             "default": "fast"},
                },
                "required": ["number"],
            },
        }]
    return Case(
        id=case_id,
        category="simple",
        turns=tuple(turns or [{"role": "user", "content": "What is 5 factorial?"}]),
        functions=tuple(functions),
        language=language,
    )


@pytest.fixture
def make_case() -> Any:
    """Builder: ``make_case(functions=None, *, turns=None, language="en", case_id="case_1")``."""
    return _make_case


@pytest.fixture
def case() -> Case:
    return _make_case()
