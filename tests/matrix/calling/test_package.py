"""The calling package: its public names resolve, and importing it stays light."""

from __future__ import annotations

import subprocess
import sys

import promptgrid.matrix.calling as calling


def test_all_is_complete_and_documented() -> None:
    public = {n for n in dir(calling) if not n.startswith("_") and n not in {"annotations"}}
    modules = {n for n in public if type(getattr(calling, n)).__name__ == "module"}
    assert set(calling.__all__) == public - modules
    assert all(getattr(calling, n).__doc__ for n in calling.__all__ if callable(getattr(calling, n)))


def test_import_pulls_no_model_library() -> None:
    code = ("import sys, promptgrid.matrix.calling; "
            "print(sorted(m for m in ('litellm', 'llama_cpp', 'numpy', 'jsonschema') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"
