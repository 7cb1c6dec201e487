"""Shared builders for the checker tests, and bfcl-eval as a reference (skipped when absent)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from promptgrid.records import Case

_HERE = Path(__file__).parent


def load_helper(name: str) -> ModuleType:
    """Import a helper module of this folder by path (tests run with --import-mode=importlib)."""
    key = f"_promptgrid_check_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, _HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module


def fn(name: str, required: list[str] | None = None, **props: Any) -> dict[str, Any]:
    """A BFCL function schema: ``fn("f", ["a"], a="integer", b={"type": "array", "items": {"type": "string"}})``."""
    properties = {k: (v if isinstance(v, dict) else {"type": v}) for k, v in props.items()}
    return {"name": name, "description": "", "parameters": {"type": "dict", "properties": properties,
                                                             "required": required or []}}


def case(category: str, functions: list[dict[str, Any]], ground_truth: list[dict[str, Any]],
         case_id: str = "c1", language: str = "en") -> Case:
    return Case(id=case_id, category=category, turns=({"role": "user", "content": "q"},),
                functions=tuple(functions), ground_truth=tuple(ground_truth), language=language)


@pytest.fixture(scope="session")
def b() -> SimpleNamespace:
    """The record builders of this folder: ``b.fn(...)``, ``b.case(...)``."""
    return SimpleNamespace(fn=fn, case=case)


@pytest.fixture(scope="session")
def bfcl_helper() -> ModuleType:
    """The bfcl_reference helper module (corpus builder, reference loader)."""
    return load_helper("bfcl_reference")


@pytest.fixture(scope="session")
def bfcl_reference() -> Any:
    """bfcl-eval's decoder and checker (see bfcl_reference.py); skips when bfcl-eval is not installed."""
    ref = load_helper("bfcl_reference").load_reference()
    if ref is None:
        pytest.skip("bfcl-eval is not installed (pip install --no-deps bfcl-eval==2026.3.23)")
    return ref
