"""bfcl-eval as the reference for the checker tests (skipped when absent); builders are in support.builders."""

from __future__ import annotations

import pytest

from support.bfcl_reference import Reference, load_reference


@pytest.fixture(scope="session")
def bfcl_reference() -> Reference:
    """bfcl-eval's decoder and checker (see support/bfcl_reference.py); skips when bfcl-eval is not installed."""
    ref = load_reference()
    if ref is None:
        pytest.skip("bfcl-eval is not installed (pip install --no-deps bfcl-eval==2026.3.23)")
    return ref
