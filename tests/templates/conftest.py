"""Fixtures for the template tests: the default case and bfcl-eval itself as the reference.

bfcl-eval is installed with --no-deps, so ``bfcl_eval.model_handler.utils``
cannot be imported as is (it imports tree_sitter parsers and tenacity). The
``bfcl`` fixture executes that one file under a private module name, with
stand-ins for the missing modules present in ``sys.modules`` only while it
runs (``support.bfcl``); nothing of bfcl-eval's is patched. bfcl-eval
creates folders under its project root when imported, so ``BFCL_PROJECT_ROOT``
points at a temp dir.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from promptgrid.records import Case
from support.bfcl import load_bfcl_modules
from support.builders import make_case


@dataclass
class BfclReference:
    utils: Any  # bfcl_eval.utils
    model_utils: Any  # bfcl_eval/model_handler/utils.py, loaded privately


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
            (model_utils,) = load_bfcl_modules("bfcl_eval.model_handler.utils")
            yield BfclReference(utils=utils, model_utils=model_utils)
        finally:
            if old is None:
                os.environ.pop("BFCL_PROJECT_ROOT", None)
            else:
                os.environ["BFCL_PROJECT_ROOT"] = old


@pytest.fixture
def case() -> Case:
    """The default ``make_case()``: math.factorial, "What is 5 factorial?"."""
    return make_case()
