"""Per-model case x variant matrices and the bootstrap that resamples them.

Per model, jobs become case x variant matrices of sums (correct answers and
scored jobs per case and variant, likewise for FSA, format match and
format-agnostic validity). One set of bootstrap weights over that model's
cases (``Resampler``) is shared by every statistic of the model, so the
spread, the std, the dimension effects and the paired differences all
resample the *same* cases jointly across variants, which keeps the pairing
between variants.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from promptgrid.matrix.report import stats
from promptgrid.matrix.running.results import ResultRow

from ._model import Interval

__all__ = [
    "METRICS",
    "ModelData",
    "Resampler",
    "boundary_interval",
    "ci_of",
    "model_data",
    "nanreduce",
    "paired",
    "quiet_nan",
    "rate",
]

METRICS = ("accuracy", "fsa", "format_match", "format_agnostic")


class Resampler:
    """Bootstrap weights over a fixed list of cases, applied to per-case sums."""

    _DENSE_CELLS = 4_000_000  # up to this size the weights are kept as one float64 matrix (32 MB)
    _ROWS = 256  # beyond it, rows of the weight matrix multiplied at once (bounds temporaries)

    def __init__(self, n_cases: int, n_resamples: int, seed: np.random.SeedSequence) -> None:
        chunks = list(stats.bootstrap_weights(n_cases, n_resamples, seed))
        w = np.concatenate(chunks) if chunks else np.zeros((0, n_cases))
        if w.size <= self._DENSE_CELLS:
            self.w = w
        else:
            # Counts are small integers; uint16 keeps 2,000 x 10,000 cases at 40 MB.
            self.w = w.astype(np.uint16 if n_cases < 65_536 else np.uint32)

    def sums(self, x: np.ndarray) -> np.ndarray:
        """Resampled sums: (n_resamples, k) for per-case values x of shape (n_cases, k)."""
        if self.w.dtype == np.float64:
            return np.asarray(self.w @ x, dtype=np.float64)
        out = np.empty((self.w.shape[0], x.shape[1]))
        for i in range(0, self.w.shape[0], self._ROWS):
            out[i : i + self._ROWS] = self.w[i : i + self._ROWS].astype(np.float64) @ x
        return out

    def ratio(self, num: np.ndarray, den: np.ndarray) -> np.ndarray:
        """Resampled sum(num) / sum(den) per column; NaN where a resample has no denominator."""
        one_d = num.ndim == 1
        n2 = num[:, None] if one_d else num
        d2 = den[:, None] if one_d else den
        both = self.sums(np.concatenate([n2, d2], axis=1).astype(np.float64))
        k = n2.shape[1]
        top, bottom = both[:, :k], both[:, k:]
        with np.errstate(invalid="ignore", divide="ignore"):
            out = np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1.0), np.nan)
        return np.asarray(out[:, 0] if one_d else out)


def ci_of(samples: np.ndarray, confidence: float) -> Interval:
    return stats.percentile_interval(samples, confidence)


def nanreduce(fn: Any, arr: np.ndarray, axis: int = 1) -> np.ndarray:
    with np.errstate(invalid="ignore"), quiet_nan():
        return np.asarray(fn(arr, axis=axis), dtype=np.float64)


@contextlib.contextmanager
def quiet_nan() -> Iterator[None]:
    """Silence numpy's all-NaN-slice warnings: an all-NaN resample is expected, and yields NaN."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


@dataclass
class ModelData:
    model: str
    cases: list[str]
    case_language: list[str]
    vids: list[str]
    num: dict[str, np.ndarray]  # metric -> (cases, variants)
    den: dict[str, np.ndarray]
    resampler: Resampler
    _boot: dict[str, np.ndarray] | None = None

    def col(self, vid: str) -> int:
        return self.vids.index(vid)

    def boot(self, metric: str = "accuracy") -> np.ndarray:
        """Bootstrap replicates (n_resamples, variants) of a metric, computed once per model."""
        if self._boot is None:
            self._boot = {}
        if metric not in self._boot:
            self._boot[metric] = self.resampler.ratio(self.num[metric], self.den[metric])
        return self._boot[metric]


def model_data(model: str, jobs: Sequence[ResultRow], order: Sequence[str], n_resamples: int, seed: int) -> ModelData:
    scored = [j for j in jobs if j.scored]
    cases = sorted({j.case_id for j in scored})
    lang: dict[str, str] = {}
    for j in scored:
        lang.setdefault(j.case_id, j.case_language)
    present = {j.variant_id for j in scored}
    vids = [v for v in order if v in present]
    ci = {c: i for i, c in enumerate(cases)}
    vi = {v: i for i, v in enumerate(vids)}
    num = {m: np.zeros((len(cases), len(vids))) for m in METRICS}
    den = {m: np.zeros((len(cases), len(vids))) for m in METRICS}
    for j in scored:
        r, c = ci[j.case_id], vi[j.variant_id]
        num["accuracy"][r, c] += j.correct
        den["accuracy"][r, c] += 1
        failed = j.error is not None
        for metric, value in (
            ("fsa", j.function_selection_correct),
            ("format_match", j.format_match),
            ("format_agnostic", j.format_agnostic_valid),
        ):
            if failed:  # a failed call counts as incorrect in every rate
                den[metric][r, c] += 1
            elif value is not None:
                num[metric][r, c] += value
                den[metric][r, c] += 1
    resampler = Resampler(len(cases), n_resamples, stats.seed_for(model, base=seed))
    return ModelData(model, cases, [lang[c] for c in cases], vids, num, den, resampler)


def boundary_interval(all_correct: bool, den: np.ndarray, confidence: float) -> Interval:
    """Interval for a clustered rate of exactly 0 or 1, where the bootstrap collapses to a point.

    Every resample of all-correct cases is all-correct, so the percentile
    interval would be [1, 1]: false certainty. Wilson over cases (each case
    one trial) is used instead - conservative, as repeats of a case add less
    than independent cases would.
    """
    cases = int(np.count_nonzero(den))
    return stats.wilson_interval(cases if all_correct else 0, cases, confidence)


def rate(num: float, den: float) -> float:
    return float(num / den) if den > 0 else math.nan


def paired(
    resampler: Resampler,
    num: np.ndarray,
    den: np.ndarray,
    a: int,
    b: int,
) -> tuple[int, float, float, np.ndarray, int, int]:
    """Variant column ``a`` against column ``b`` on the cases both have."""
    shared = (den[:, a] > 0) & (den[:, b] > 0)
    m = shared.astype(float)
    na, da, nb, db = num[:, a] * m, den[:, a] * m, num[:, b] * m, den[:, b] * m
    acc_a, acc_b = rate(na.sum(), da.sum()), rate(nb.sum(), db.sum())
    boot = resampler.ratio(np.stack([na, nb], 1), np.stack([da, db], 1))
    diff_boot = boot[:, 0] - boot[:, 1]
    with np.errstate(invalid="ignore", divide="ignore"):
        sa = np.where(shared, na / np.where(da > 0, da, 1), 0.0)
        sb = np.where(shared, nb / np.where(db > 0, db, 1), 0.0)
    better, worse = int(np.sum(shared & (sa > sb))), int(np.sum(shared & (sa < sb)))
    return int(shared.sum()), acc_a, acc_b, diff_boot, better, worse
