"""promptgrid.matrix.report.stats against hand-computed fixtures and, where they exist, scipy / statsmodels."""

from __future__ import annotations

import importlib.util
import itertools
import math
import statistics
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptgrid.matrix.report import stats
from promptgrid.matrix.scoring import metrics

# --------------------------------------------------------------------------- Wilson


@pytest.mark.parametrize(
    ("k", "n", "expected"),
    [
        # Hand-computed with z = 1.959964: center = (p + z²/2n) / (1 + z²/n),
        # half = z·sqrt(p(1-p)/n + z²/4n²) / (1 + z²/n)
        (8, 10, (0.4901625, 0.9433178)),
        (0, 10, (0.0, 0.2775328)),
        (10, 10, (0.7224672, 1.0)),
        (1, 2, (0.0945312, 0.9054688)),
    ],
)
def test_wilson_hand_computed(k: int, n: int, expected: tuple[float, float]) -> None:
    lo, hi = stats.wilson_interval(k, n)
    assert lo == pytest.approx(expected[0], abs=1e-6)
    assert hi == pytest.approx(expected[1], abs=1e-6)


def test_wilson_empty_and_invalid() -> None:
    assert all(math.isnan(x) for x in stats.wilson_interval(0, 0))
    with pytest.raises(ValueError):
        stats.wilson_interval(3, 2)


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 5000), frac=st.floats(0, 1), conf=st.sampled_from([0.9, 0.95, 0.99]))
def test_wilson_matches_statsmodels(n: int, frac: float, conf: float) -> None:
    proportion = pytest.importorskip("statsmodels.stats.proportion")
    k = round(frac * n)
    lo, hi = stats.wilson_interval(k, n, conf)
    ref_lo, ref_hi = proportion.proportion_confint(k, n, alpha=1 - conf, method="wilson")
    assert lo == pytest.approx(ref_lo, abs=1e-10)
    assert hi == pytest.approx(ref_hi, abs=1e-10)


# --------------------------------------------------------------------------- McNemar


def test_mcnemar_hand_computed() -> None:
    # b=1, c=9: 2·P[X <= 1], X ~ Bin(10, 1/2) = 2·(1 + 10)/1024.
    assert stats.mcnemar_exact(1, 9) == pytest.approx(22 / 1024, abs=1e-15)
    assert stats.mcnemar_exact(9, 1) == pytest.approx(22 / 1024, abs=1e-15)
    # mid-p: 2·P[X < 1] + P[X = 1] = (2 + 10)/1024.
    assert stats.mcnemar_exact(1, 9, mid_p=True) == pytest.approx(12 / 1024, abs=1e-15)
    assert stats.mcnemar_exact(0, 0) == 1.0
    assert stats.mcnemar_exact(5, 5) == 1.0
    assert stats.mcnemar_exact(5, 5, mid_p=True) == pytest.approx(1.0)
    assert stats.mcnemar_exact(0, 6) == pytest.approx(2 / 64)


@settings(max_examples=200, deadline=None)
@given(b=st.integers(0, 400), c=st.integers(0, 400), a=st.integers(0, 50), d=st.integers(0, 50))
def test_mcnemar_matches_statsmodels(b: int, c: int, a: int, d: int) -> None:
    contingency = pytest.importorskip("statsmodels.stats.contingency_tables")
    ref = contingency.mcnemar(np.array([[a, b], [c, d]]), exact=True).pvalue
    assert stats.mcnemar_exact(b, c) == pytest.approx(ref, rel=1e-9, abs=1e-300)


@pytest.mark.parametrize(("b", "c"), [(5000, 5200), (600, 800), (1200, 1000), (10, 2000), (4000, 4000)])
def test_mcnemar_large_counts(b: int, c: int) -> None:
    # Beyond the exact-integer limit the tail is summed in floating point; check against
    # scipy's binomial tail, and that it is fast (a quick run of many).
    scipy_stats = pytest.importorskip("scipy.stats")
    ref = min(1.0, 2 * scipy_stats.binom.cdf(min(b, c), b + c, 0.5))
    assert stats.mcnemar_exact(b, c) == pytest.approx(ref, rel=1e-9, abs=1e-300)
    mid = 2 * scipy_stats.binom.cdf(min(b, c) - 1, b + c, 0.5) + scipy_stats.binom.pmf(min(b, c), b + c, 0.5)
    assert stats.mcnemar_exact(b, c, mid_p=True) == pytest.approx(min(1.0, mid), rel=1e-8, abs=1e-300)


# --------------------------------------------------------------------------- Holm


def test_holm_hand_computed() -> None:
    # sorted: 0.005·4 = 0.02, 0.01·3 = 0.03, 0.03·2 = 0.06, 0.04·1 = 0.04 -> running max 0.06
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    out = stats.holm([0.01, math.nan, 0.02])
    assert out[0] == pytest.approx(0.02) and math.isnan(out[1]) and out[2] == pytest.approx(0.02)
    assert stats.holm([]) == []


@pytest.mark.slow
@settings(max_examples=25, deadline=None)  # multipletests is slow per call
@given(st.lists(st.floats(0, 1), min_size=1, max_size=30))
def test_holm_matches_statsmodels(pvals: list[float]) -> None:
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    ref = multitest.multipletests(pvals, method="holm")[1]
    assert stats.holm(pvals) == pytest.approx(list(ref), abs=1e-12)


# --------------------------------------------------------------------------- bootstrap


def test_bootstrap_percentile_matches_scipy() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(1)
    x = (rng.random(200) < 0.7).astype(float)
    ours = stats.percentile_interval(stats.ratio_bootstrap(x, np.ones_like(x), 20_000, seed=5))
    ref = scipy_stats.bootstrap(
        (x,), np.mean, n_resamples=20_000, method="percentile", random_state=6, confidence_level=0.95
    ).confidence_interval
    # Two independent Monte Carlo runs of the same interval: they agree to well under a point.
    assert ours[0] == pytest.approx(ref.low, abs=0.01)
    assert ours[1] == pytest.approx(ref.high, abs=0.01)


def test_cluster_bootstrap_resamples_cases_not_jobs() -> None:
    # Three identical repeats per case carry no more information than one: with the
    # case as the resampling unit the replicates are exactly those of one repeat.
    rng = np.random.default_rng(2)
    correct = (rng.random(60) < 0.6).astype(float)
    one = stats.ratio_bootstrap(correct, np.ones(60), 500, seed=9)
    three = stats.ratio_bootstrap(3 * correct, 3 * np.ones(60), 500, seed=9)
    np.testing.assert_allclose(one, three)
    # A naive bootstrap over the 180 jobs would be narrower; ours is not.
    jobs = np.repeat(correct, 3)
    naive = stats.percentile_interval(stats.ratio_bootstrap(jobs, np.ones(180), 4000, seed=1))
    clustered = stats.percentile_interval(stats.ratio_bootstrap(3 * correct, 3 * np.ones(60), 4000, seed=1))
    assert clustered[1] - clustered[0] > 1.4 * (naive[1] - naive[0])


def test_bootstrap_weights_are_deterministic_multinomial_draws() -> None:
    a = np.concatenate(list(stats.bootstrap_weights(37, 300, seed=4)))
    b = np.concatenate(list(stats.bootstrap_weights(37, 300, seed=4)))
    assert a.shape == (300, 37)
    np.testing.assert_array_equal(a, b)
    assert np.all(a.sum(axis=1) == 37)
    c = np.concatenate(list(stats.bootstrap_weights(37, 300, seed=5)))
    assert not np.array_equal(a, c)


def test_seed_depends_only_on_its_names() -> None:
    s1 = stats.seed_for("model-a").generate_state(4)
    s2 = stats.seed_for("model-a").generate_state(4)
    s3 = stats.seed_for("model-b").generate_state(4)
    assert list(s1) == list(s2) and list(s1) != list(s3)


def test_percentile_interval_ignores_nan() -> None:
    assert stats.percentile_interval([np.nan, 1.0, 1.0]) == (1.0, 1.0)
    assert all(math.isnan(x) for x in stats.percentile_interval([np.nan]))


# --------------------------------------------------------------------------- std, ProSA


def test_sample_std_is_statistics_stdev() -> None:
    values = [0.81, 0.75, 0.9, 0.62, 0.88]
    assert stats.sample_std(values) == pytest.approx(statistics.stdev(values))
    assert stats.sample_std([0.5]) == 0.0


def test_bfcl_eval_uses_sample_std() -> None:
    """Guard the claim in the docs: bfcl-eval's accuracy_std is statistics.stdev (n - 1)."""
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("bfcl-eval is not installed")
    source = (Path(list(spec.submodule_search_locations)[0]) / "eval_checker" / "eval_runner.py").read_text()
    assert "accuracy_std = round(statistics.stdev(config_accuracies) * 100, 2)" in source
    assert "max(config_accuracies) - min(config_accuracies)" in source


def test_instance_sensitivity_hand_computed() -> None:
    scores = np.array(
        [
            [1, 0, 1, 1],  # 3 of 6 pairs differ -> 0.5
            [1, np.nan, 0, np.nan],  # 1 pair, differs -> 1.0
            [1, 1, 1, 1],  # 0
            [np.nan, 1, np.nan, np.nan],  # one variant: undefined
            [0.5, 0, 1, 1],  # |.5-0|+|.5-1|·2+|0-1|·2+0 = .5+1+2 = 3.5 / 6
        ]
    )
    out = stats.instance_sensitivity(scores)
    assert out[:3] == pytest.approx([0.5, 1.0, 0.0])
    assert math.isnan(out[3])
    assert out[4] == pytest.approx(3.5 / 6)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.lists(st.one_of(st.none(), st.sampled_from([0.0, 1 / 3, 0.5, 1.0])), min_size=4, max_size=4),
        min_size=1,
        max_size=12,
    )
)
def test_instance_sensitivity_matches_brute_force(rows: list[list[float | None]]) -> None:
    arr = np.array([[np.nan if x is None else x for x in r] for r in rows])
    out = stats.instance_sensitivity(arr)
    for r, got in zip(arr, out, strict=True):
        vals = [x for x in r if not np.isnan(x)]
        pairs = list(itertools.combinations(vals, 2))
        if not pairs:
            assert math.isnan(got)
        else:
            assert got == pytest.approx(sum(abs(a - b) for a, b in pairs) / len(pairs))


# --------------------------------------------------------------------------- pass^k


def _pass_hat_k(correct: list[int], trials: list[int], k: int, *, unbiased: bool = False) -> float:
    """pass^k over cases: the mean of the per-case values the report resamples (Ticket-Bench section 3.5)."""
    return float(np.mean(stats.pass_hat_k_per_case(correct, trials, k, unbiased=unbiased)))


def test_pass_hat_k_hand_computed() -> None:
    # Ticket-Bench: mean over cases of (c/M)^k.
    assert _pass_hat_k([3, 2, 0], [3, 3, 3], 3) == pytest.approx((1 + 8 / 27 + 0) / 3)
    assert _pass_hat_k([3, 2, 0], [3, 3, 3], 1) == pytest.approx(5 / 9)
    # Unbiased C(c,k)/C(M,k): C(2,3) = 0.
    assert _pass_hat_k([3, 2, 0], [3, 3, 3], 3, unbiased=True) == pytest.approx(1 / 3)
    assert _pass_hat_k([3, 2, 0], [3, 3, 3], 2, unbiased=True) == pytest.approx((1 + 1 / 3 + 0) / 3)
    with pytest.raises(ValueError):
        _pass_hat_k([4], [3], 1)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 6), st.integers(0, 6)), min_size=1, max_size=20), st.integers(1, 6))
def test_pass_hat_k_matches_metrics(cases: list[tuple[int, int]], k: int) -> None:
    trials = [m for m, _ in cases]
    correct = [min(c, m) for m, c in cases]
    outcomes = [[True] * c + [False] * (m - c) for c, m in zip(correct, trials, strict=True)]
    assert _pass_hat_k(correct, trials, k) == pytest.approx(metrics.pass_hat_k(outcomes, k))
    if all(m >= k for m in trials):
        assert _pass_hat_k(correct, trials, k, unbiased=True) == pytest.approx(
            metrics.pass_hat_k(outcomes, k, estimator="unbiased")
        )


def test_percentile_matches_numpy_linear() -> None:
    assert stats.percentile([1, 2, 3, 4], 50) == 2.5
    assert stats.percentile([1.0, 2.0, 3.0, 4.0, 100.0], 95) == pytest.approx(np.percentile([1, 2, 3, 4, 100], 95))
    assert math.isnan(stats.percentile([], 50))
