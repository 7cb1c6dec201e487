"""Statistics for sensitivity reports: intervals, paired tests, resampling, pass^k.

Everything here is a pure function over counts or numpy arrays, so each one
can be checked against a hand-computed fixture and, in tests, against scipy /
statsmodels where they implement the same thing. The report never needs scipy:
the binomial tail is summed exactly with integers and the normal quantile
comes from :class:`statistics.NormalDist`.

Choices, and why:

- **Wilson** interval for a single proportion when every case was asked once
  (jobs are then independent Bernoulli trials); it behaves at 0 % and 100 %,
  where the Wald interval collapses to a point.
- **Cluster bootstrap** over cases whenever repeats exist or a statistic
  combines variants (spread, std, marginal effects, paired differences): the
  case is the unit that was sampled from the benchmark, repeats of one case
  are correlated, and resampling cases *jointly* across variants keeps the
  pairing. Resampling is done with multinomial weight matrices (one row per
  resample), so a statistic is a matrix product rather than a Python loop.
  Intervals are bootstrap *percentile* intervals (what ``scipy.stats.bootstrap``
  calls ``method='percentile'``).
- **McNemar exact**: a two-sided binomial test on the discordant pairs
  (``min(1, 2 * P[X <= min(b, c)])``, ``X ~ Bin(b + c, 1/2)``), as statsmodels'
  ``mcnemar(exact=True)``. ``mid_p=True`` gives the less conservative mid-p
  version (``2 * P[X < k] + P[X = k]``).
- **Holm** step-down adjustment for a family of paired tests.
- **std across variants**: the *sample* standard deviation (n - 1), because
  bfcl-eval's ``accuracy_std`` (eval_checker/eval_runner.py, format
  sensitivity) is ``statistics.stdev``.
- **pass^k** per case, for the bootstrap: ``metrics.pass_hat_k_case`` (Ticket-Bench's
  ``(c / M) ** k``, or the unbiased ``C(c, k) / C(M, k)`` with ``unbiased=True``).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt

from promptgrid.matrix.scoring.metrics import pass_hat_k_case

from ._wilson import DEFAULT_CONFIDENCE, wilson_interval

__all__ = [
    "DEFAULT_CONFIDENCE",
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "FloatArray",
    "bootstrap_weights",
    "holm",
    "instance_sensitivity",
    "mcnemar_exact",
    "pass_hat_k_per_case",
    "percentile",
    "percentile_interval",
    "ratio_bootstrap",
    "sample_std",
    "seed_for",
    "wilson_interval",
]

FloatArray = npt.NDArray[np.float64]

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 20250717  # BFCL V4 format-sensitivity release date; any fixed value would do

# Weight matrices are built in chunks of at most this many cells, so a run with
# thousands of cases does not allocate n_resamples x n_cases floats at once.
_MAX_CHUNK_CELLS = 4_000_000


_EXACT_LIMIT = 1000  # up to this many discordant pairs the tail is summed with exact integers


def _binom_half_cdf(k: int, n: int) -> float:
    """``P[X <= k]`` for ``X ~ Bin(n, 1/2)``.

    Exact integer sums up to ``_EXACT_LIMIT`` trials; beyond, the terms are
    summed downwards from ``P[X = k]`` (computed with lgamma) by the ratio
    ``P[X = i-1] / P[X = i] = i / (n - i + 1)``, which is < 1 for k <= n/2,
    so the sum converges fast and never underflows term by term.
    """
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if n <= _EXACT_LIMIT:
        return sum(math.comb(n, i) for i in range(k + 1)) / (1 << n)
    if 2 * k > n:
        return 1.0 - _binom_half_cdf(n - k - 1, n)
    log_pk = math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) - n * math.log(2)
    total, term = 1.0, 1.0
    for i in range(k, 0, -1):
        term *= i / (n - i + 1)
        total += term
        if term < 1e-17 * total:
            break
    return min(1.0, math.exp(log_pk) * total)


def mcnemar_exact(b: int, c: int, *, mid_p: bool = False) -> float:
    """Two-sided exact McNemar p-value from the discordant counts ``b`` and ``c``.

    ``b``: pairs where only the first condition is correct; ``c``: only the
    second. With no discordant pair there is no evidence of a difference: 1.0.
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    if mid_p:
        below = _binom_half_cdf(k - 1, n)
        at = _binom_half_cdf(k, n) - below
        return min(1.0, 2 * below + at)
    return min(1.0, 2 * _binom_half_cdf(k, n))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values, in the input order (NaN stays NaN, not counted)."""
    indexed = [(p, i) for i, p in enumerate(p_values) if not math.isnan(p)]
    m = len(indexed)
    out = [math.nan] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(sorted(indexed)):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def seed_for(*parts: str, base: int = DEFAULT_SEED) -> np.random.SeedSequence:
    """A seed that depends only on ``base`` and the names given (e.g. the model).

    Adding a model to a report therefore leaves the other models' intervals unchanged.
    """
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).digest()
    words = [base] + [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 32, 4)]
    return np.random.SeedSequence(words)


def bootstrap_weights(
    n_units: int, n_resamples: int = DEFAULT_RESAMPLES, seed: np.random.SeedSequence | int = DEFAULT_SEED
) -> Iterator[FloatArray]:
    """Yield resampling weights in chunks: arrays of shape (chunk, n_units).

    Row ``r`` holds how many times each unit (case) is drawn in resample ``r``
    (a multinomial with equal probabilities), so ``W @ x`` is the resampled sum
    of a per-unit quantity ``x``. Deterministic for a given seed.
    """
    if n_units <= 0:
        return
    rng = np.random.default_rng(seed)
    chunk = max(1, min(n_resamples, _MAX_CHUNK_CELLS // n_units))
    done = 0
    probs = np.full(n_units, 1.0 / n_units)
    while done < n_resamples:
        size = min(chunk, n_resamples - done)
        yield rng.multinomial(n_units, probs, size=size).astype(np.float64)
        done += size


def ratio_bootstrap(
    numerators: FloatArray,
    denominators: FloatArray,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: np.random.SeedSequence | int = DEFAULT_SEED,
) -> FloatArray:
    """Bootstrap replicates of ``sum(num) / sum(den)`` per column, resampling rows (cases).

    ``numerators`` / ``denominators``: (n_cases, n_columns) (or 1-D for one
    column), e.g. correct answers and jobs per case and variant. Returns
    (n_resamples, n_columns); NaN where a resample holds no job of a column.
    """
    num = np.asarray(numerators, dtype=np.float64)
    den = np.asarray(denominators, dtype=np.float64)
    one_d = num.ndim == 1
    if one_d:
        num, den = num[:, None], den[:, None]
    parts = []
    for w in bootstrap_weights(num.shape[0], n_resamples, seed):
        top, bottom = w @ num, w @ den
        with np.errstate(invalid="ignore", divide="ignore"):
            parts.append(np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1.0), np.nan))
    out = np.concatenate(parts, axis=0) if parts else np.empty((0, num.shape[1]))
    return out[:, 0] if one_d else out


def percentile_interval(samples: npt.ArrayLike, confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float]:
    """Percentile interval of bootstrap replicates (NaN replicates ignored)."""
    arr = np.asarray(samples, dtype=np.float64)
    arr = arr[~np.isnan(arr)]
    if arr.size == 0:
        return (math.nan, math.nan)
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(arr, [alpha, 1 - alpha])
    return (float(lo), float(hi))


def percentile(values: npt.ArrayLike, q: float) -> float:
    """The q-th percentile (0..100, linear interpolation as numpy's default); NaN if empty."""
    arr = np.asarray(values, dtype=np.float64)
    arr = arr[~np.isnan(arr)]
    return float(np.percentile(arr, q)) if arr.size else math.nan


def sample_std(values: npt.ArrayLike, axis: int = -1) -> FloatArray | float:
    """Sample standard deviation (n - 1), as bfcl-eval's ``accuracy_std``; 0 for one value."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.shape[axis] < 2:
        result = np.zeros(np.delete(arr.shape, axis if axis >= 0 else arr.ndim + axis))
        return float(result) if result.ndim == 0 else result
    result = np.std(arr, axis=axis, ddof=1)
    return float(result) if np.ndim(result) == 0 else result


def instance_sensitivity(scores: npt.ArrayLike) -> FloatArray:
    """ProSA-style sensitivity of each case: mean |s_a - s_b| over pairs of variants.

    ``scores``: (n_cases, n_variants), a case's correctness under each variant
    (0/1, or the mean over repeats), NaN where the case was not run under that
    variant. Uses the sorted-values identity
    ``sum_{a<b} |x_a - x_b| = sum_i x_(i) * (2i - n + 1)``; NaN for cases run
    under fewer than two variants.
    """
    arr = np.asarray(scores, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError("scores must be a 2-D array (cases x variants)")
    n = np.sum(~np.isnan(arr), axis=1)
    # NaNs sort last; give them weight 0 by zeroing them after sorting.
    s = np.sort(arr, axis=1)
    idx = np.arange(arr.shape[1], dtype=np.float64)[None, :]
    coef = 2 * idx - (n[:, None] - 1)
    valid = idx < n[:, None]
    total = np.sum(np.where(valid, np.nan_to_num(s) * coef, 0.0), axis=1)
    pairs = n * (n - 1) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(pairs > 0, total / np.where(pairs > 0, pairs, 1), np.nan)


def pass_hat_k_per_case(correct: npt.ArrayLike, trials: npt.ArrayLike, k: int, *, unbiased: bool = False) -> FloatArray:
    """Per-case pass^k (``metrics.pass_hat_k_case`` of each case), as an array to resample.

    The unbiased form needs ``k <= M`` for every case (NaN otherwise).
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    c = np.asarray(correct, dtype=np.int64)
    m = np.asarray(trials, dtype=np.int64)
    if np.any(m <= 0) or np.any(c < 0) or np.any(c > m):
        raise ValueError("need 0 <= correct <= trials and trials >= 1 for every case")
    return np.array([pass_hat_k_case(ci, mi, k, unbiased=unbiased)
                     for ci, mi in zip(c.tolist(), m.tolist(), strict=True)], dtype=np.float64)
