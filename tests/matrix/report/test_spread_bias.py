"""The spread's noise figure ("noise ≈ X pp" in the HTML, "spread bias" in the tables) is never negative: noise
can only widen max - min. Small samples made the plain bootstrap estimate negative."""

from __future__ import annotations

import random

import pytest

from promptgrid.matrix.report import aggregate
from promptgrid.variants import Variant
from support.rows import rows_with_accuracy

VARIANTS = [Variant(return_format=r, doc_format=d) for r in ("python", "json") for d in ("json", "python", "xml")]


@pytest.mark.parametrize("seed", range(30))
def test_spread_bias_is_never_negative_and_at_most_the_spread_interval(seed: int) -> None:
    rnd = random.Random(seed)
    n = rnd.choice([3, 5, 10, 20])
    base = [rnd.random() < 0.5 for _ in range(n)]
    spec = {v: [b if rnd.random() < 0.9 else not b for b in base] for v in VARIANTS}
    (s,) = aggregate(rows_with_accuracy(spec), n_resamples=400).sensitivity
    assert 0.0 <= s.spread_bias <= s.spread_ci[1]


def test_identical_variants_have_all_their_spread_from_noise() -> None:
    rnd = random.Random(7)
    outcomes = [rnd.random() < 0.5 for _ in range(40)]
    noisy = {v: [o if rnd.random() < 0.85 else not o for o in outcomes] for v in VARIANTS}
    (s,) = aggregate(rows_with_accuracy(noisy), n_resamples=400).sensitivity
    assert s.spread_bias > 0
    same = {v: outcomes for v in VARIANTS}  # no variant differs in any case: resampling cannot spread them
    (t,) = aggregate(rows_with_accuracy(same), n_resamples=400).sensitivity
    assert t.spread == 0 and t.spread_bias == 0
