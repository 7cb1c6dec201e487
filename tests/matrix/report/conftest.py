"""Fixtures for report tests: seeded synthetic runs and a small variant product (row builders: support.rows)."""

from __future__ import annotations

import itertools

import pytest

from promptgrid.matrix.report import synthetic_rows
from promptgrid.matrix.running.results import ResultRow
from promptgrid.variants import Variant


@pytest.fixture(scope="session")
def bfcl_rows() -> list[ResultRow]:
    """2 models x 26 bfcl_v4 variants x 40 cases, ~1 % failed calls."""
    return synthetic_rows(seed=7)


@pytest.fixture(scope="session")
def language_rows() -> list[ResultRow]:
    """2 models x 3 massive_translation variants x 12 cases x 4 languages x 3 repeats."""
    return synthetic_rows(grid="massive_translation", languages=("en", "de", "ja", "hi"), repeats=3, n_cases=12, seed=3)


@pytest.fixture()
def product_variants() -> list[Variant]:
    """return_format {python, json} x tool_call_tag {False, True}."""
    return [Variant(return_format=r, tool_call_tag=t) for r, t in itertools.product(("python", "json"), (False, True))]
