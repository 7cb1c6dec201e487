"""What an adaptive run found: the best and worst variant, the spread, every variant's accuracy, the quantiles.

Computed from the store alone (``Run.adaptive``, ``report``, the end-of-run
summary): the model's planner is replayed round by round against the stored
outcomes (``replay``), which gives the cells each round chose, the order the
budget was spent in, and a point of the trace (estimates against calls
spent) after every round. Every number says how it was obtained
(``Estimate.kind``):

- ``measured``: a proportion of cells that were run (``best-worst`` and
  ``uniform``): the variant's accuracy on its ``n`` measured cells, with a
  Wilson interval; the spread is the difference between the best and the
  worst variant's measured accuracy, with the interval of the difference of
  their Beta(0.5 + correct, 0.5 + wrong) posteriors (Monte Carlo, fixed seed).
  Which variant is best (worst) is decided, for ``best-worst``, by the
  logistic model's estimate below (fitted to the measured cells: it adjusts
  for the case difficulty of the cells each variant happened to see), and for
  ``uniform`` by the posterior mean (so a variant seen on two cells does not
  win on 2/2); the accuracies reported are the measured ones.
- ``estimated``: predicted for cells that were not run (``distribution``,
  PromptEval): a logistic (Rasch) model, P(correct | variant v, case c) =
  sigmoid(b0 + x_v . beta + u_v - d_c), with x_v the one-hot values of the
  grid dimensions that vary (return format, doc format, tags, style,
  languages, call mode, ...), u_v a variant's own deviation and d_c the case's
  difficulty, fitted by maximum a posteriori with Gaussian priors (sd 1.5 for
  beta, 0.5 for u, 2 for d, 5 for b0; ``PRIORS``) using scipy's L-BFGS-B. A
  variant's accuracy is the mean over all its cells of the outcome where it
  was measured and the predicted probability where not. Intervals: 500 draws
  of the parameters from the Laplace approximation of the posterior (the
  inverse Hessian at the optimum; diagonal when the model has over
  ``DENSE_LIMIT`` parameters), with unmeasured cells drawn as Bernoulli
  outcomes, so an interval is that of the accuracy over the whole case set.

The quantiles (5/25/50/75/95) are those of the per-variant accuracies across
variants (``distribution`` and ``uniform``); ``best-worst`` estimates no
distribution (``quantiles`` is empty).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from promptgrid.errors import MissingDependencyError

from .planning import AdaptivePlanner, Cell, make_planner

__all__ = ["DENSE_LIMIT", "PRIORS", "QUANTILES", "AdaptiveResult", "Estimate", "TracePoint", "VariantEstimate",
           "estimate_cells", "replay"]

QUANTILES = (5, 25, 50, 75, 95)
PRIORS = {"beta": 1.5, "u": 0.5, "d": 2.0, "b0": 5.0}
"""Prior standard deviations of the logistic model's parameters (logit scale)."""
DENSE_LIMIT = 4000
"""Parameters up to which the Laplace approximation uses the full Hessian (above: its diagonal)."""
DRAWS = 500
TRACE_DRAWS = 200
_SEED = 20240501


@dataclass(frozen=True)
class Estimate:
    """One number with its 95% interval and how it was obtained (``kind``: ``measured`` or ``estimated``)."""

    value: float
    low: float
    high: float
    kind: str
    n: int = 0
    """Cells with an outcome behind the number (a variant's measured cells; both variants' for a spread)."""

    def __post_init__(self) -> None:  # numpy scalars in, plain floats out (JSON, repr)
        for name in ("value", "low", "high"):
            object.__setattr__(self, name, float(getattr(self, name)))
        object.__setattr__(self, "n", int(self.n))

    def to_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and math.isnan(v) else
                    (round(v, 6) if isinstance(v, float) else v)) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class VariantEstimate:
    variant_id: str
    label: str
    accuracy: Estimate

    def to_dict(self) -> dict[str, Any]:
        return {"variant_id": self.variant_id, "label": self.label, "accuracy": self.accuracy.to_dict()}


@dataclass(frozen=True)
class TracePoint:
    """The estimates after one round: calls spent so far, the best and worst variant, the spread."""

    calls: int
    best: VariantEstimate
    worst: VariantEstimate
    spread: Estimate

    def to_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "best": self.best.to_dict(), "worst": self.worst.to_dict(),
                "spread": self.spread.to_dict()}


@dataclass(frozen=True)
class CommonCells:
    """Measured on the cells every variant ran (the same (case, repeat) for all): variants compared without a
    model, over the cells they share. ``cells`` 0 (most adaptive runs: each variant ran its own cases): no
    best, worst or spread."""

    cells: int
    """(case, repeat) cells with an outcome for every variant."""
    cases: int
    """The cases among them."""
    best: VariantEstimate | None = None
    worst: VariantEstimate | None = None
    spread: Estimate | None = None
    """Best minus worst over these cells; interval: a bootstrap over their cases that re-picks best and worst
    in each resample (placed around the value as ``_interval`` does)."""
    noise: float | None = None
    """How much of the spread sampling noise alone makes at these cells: the mean, over the resamples, of what
    re-picking best and worst adds over the best and worst chosen here (the report's spread bias)."""
    ties: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"cells": self.cells, "cases": self.cases,
                "best": self.best.to_dict() if self.best else None,
                "worst": self.worst.to_dict() if self.worst else None,
                "spread": self.spread.to_dict() if self.spread else None,
                "noise": None if self.noise is None or math.isnan(self.noise) else round(self.noise, 6),
                "ties": {k: list(v) for k, v in self.ties.items()}}


@dataclass(frozen=True)
class AdaptiveResult:
    """What an adaptive run found for one model (schema: docs/adaptive.md)."""

    model: str
    goal: str
    budget: int
    """Cells planned at most (the budget, capped at the product)."""
    spent: int
    """Cells of the plan with a result so far (calls spent, stored answers included)."""
    product: int
    """Cells of the full product (variants x cases x repeats)."""
    rounds: int
    rounds_done: int
    seed: int
    best: VariantEstimate | None
    worst: VariantEstimate | None
    spread: Estimate | None
    variants: list[VariantEstimate] = field(default_factory=list)
    quantiles: dict[str, Estimate] = field(default_factory=dict)
    """``p5`` .. ``p95`` of the per-variant accuracies (empty for ``best-worst``)."""
    trace: list[TracePoint] = field(default_factory=list)
    ties: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """``best`` and ``worst``: the variants whose accuracy equals the best's (the worst's), that one included
    (one variant where there is no tie)."""
    common: CommonCells | None = None
    """The same variants measured on the cells all of them ran."""

    @property
    def all_tied(self) -> bool:
        """Every variant with a number has the same one (spread 0)."""
        return bool(self.best and self.worst and self.best.accuracy.value == self.worst.accuracy.value)

    @property
    def complete(self) -> bool:
        """Every round of the budget has its results."""
        return self.rounds_done >= self.rounds

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "goal": self.goal, "budget": self.budget, "spent": self.spent,
                "product": self.product, "fraction": round(self.spent / self.product, 6) if self.product else None,
                "rounds": self.rounds, "rounds_done": self.rounds_done, "complete": self.complete,
                "seed": self.seed,
                "best": self.best.to_dict() if self.best else None,
                "worst": self.worst.to_dict() if self.worst else None,
                "spread": self.spread.to_dict() if self.spread else None,
                "quantiles": {k: v.to_dict() for k, v in self.quantiles.items()},
                "ties": {k: list(v) for k, v in self.ties.items()},
                "common": self.common.to_dict() if self.common else None,
                "variants": [v.to_dict() for v in self.variants],
                "trace": [t.to_dict() for t in self.trace]}

    def __repr__(self) -> str:
        def one(v: VariantEstimate | None) -> str:
            return "-" if v is None else f"{v.variant_id} {v.accuracy.value:.1%}"

        spread = "-" if self.spread is None else f"{self.spread.value:.1%}"
        return (f"AdaptiveResult(model={self.model!r}, goal={self.goal!r}, spent={self.spent}/{self.product}, "
                f"best={one(self.best)}, worst={one(self.worst)}, spread={spread})")


# --------------------------------------------------------------------------- estimates

@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the block with the BLAS libraries numpy and scipy loaded limited to one thread (threadpoolctl), then
    restore them.

    The fits here are many small products, factorizations and L-BFGS steps (a few hundred parameters): a
    threaded OpenBLAS wakes its threads for each and they then spin, competing with the main thread for the
    cores. Measured on a two-core machine shared with other work: ``Run.adaptive()`` of a 26 x 200 distribution
    run took 5.2 s of CPU (12.7 s wall) with the default threads and 0.4 s (0.6 s wall) with one.
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _np() -> Any:
    import numpy as np

    return np


def _wilson(s: int, n: int) -> tuple[float, float]:
    from promptgrid.matrix.report.stats import wilson_interval

    return wilson_interval(s, n)


def _interval(draws: Any, value: float) -> tuple[float, float]:
    """The 95% interval of ``value`` from ``draws``: the draws' 2.5% and 97.5% quantiles taken relative to
    their median and placed around ``value`` (clipped to 0..1), so the interval always holds its point.

    The draws' own percentile interval would not: a point estimate is the plug-in value at the posterior mode,
    and the draws of a nonlinear function of the parameters (a mean of sigmoids, a maximum over variants) are
    displaced from it (Jensen; the maximum of noisy values is biased upwards), so that interval left the point
    outside or on its bound (a median of 73.5% with [62.7, 73.5]). The width and the asymmetry come from the
    draws; the location is the point's."""
    np = _np()
    lo, mid, hi = (float(x) for x in np.quantile(draws, [0.025, 0.5, 0.975]))
    if math.isnan(value):
        return lo, hi
    return max(min(0.0, value), value - (mid - lo)), min(max(1.0, value), value + (hi - mid))


TIE = 1e-9
"""Values closer than this are tied (exact ties of proportions: 3/4 and 15/20)."""


def _pick(score: Any, value: Any) -> tuple[int, int, tuple[int, ...], tuple[int, ...]]:
    """Best and worst index by ``score`` (NaN: not seen), and the variants tied with each on ``value`` (the number
    reported). On a tie of scores the best is the first variant and the worst the last one, so a run whose
    variants all tie does not name one variant both best and worst."""
    np = _np()
    k = len(score)
    b = int(np.nanargmax(score))
    w = k - 1 - int(np.nanargmin(score[::-1]))
    seen = ~np.isnan(value)
    ties_b = tuple(int(i) for i in np.flatnonzero(seen & (np.abs(value - value[b]) <= TIE)))
    ties_w = tuple(int(i) for i in np.flatnonzero(seen & (np.abs(value - value[w]) <= TIE)))
    return b, w, ties_b or (b,), ties_w or (w,)


def _measured(variants: Sequence[tuple[str, str, Mapping[str, Any]]], units: int,
              outcomes: Mapping[Cell, bool | None], goal: str, draws: int, pick: Any = None) -> dict[str, Any]:
    """Per-variant proportions; spread by Beta draws; quantiles for ``uniform``. Best and worst: by ``pick`` (a
    score per variant) when given, else by the posterior mean."""
    np = _np()
    k = len(variants)
    s = np.zeros(k)
    f = np.zeros(k)
    for (v, _c, _r), ok in outcomes.items():
        if ok is True:
            s[v] += 1
        elif ok is False:
            f[v] += 1
    n = s + f
    rng = np.random.default_rng(_SEED)
    post = rng.beta(0.5 + s, 0.5 + f, size=(draws, k))  # Jeffreys posteriors: the intervals' draws
    out_variants = []
    for i, (vid, label, _dims) in enumerate(variants):
        ni = int(n[i])
        lo, hi = _wilson(int(s[i]), ni) if ni else (math.nan, math.nan)
        out_variants.append(VariantEstimate(vid, label, Estimate(s[i] / ni if ni else math.nan, lo, hi, "measured",
                                                                 ni)))
    seen = n > 0
    if not seen.any():
        return {"variants": out_variants, "best": None, "worst": None, "spread": None, "quantiles": {}}
    mean = np.where(seen, (1 + s) / (2 + n), np.nan) if pick is None else np.where(seen, pick, np.nan)
    b, w, ties_b, ties_w = _pick(mean, np.where(seen, s / np.where(seen, n, 1), np.nan))
    best, worst = out_variants[b], out_variants[w]
    diff = post[:, b] - post[:, w]
    lo, hi = _interval(diff, best.accuracy.value - worst.accuracy.value)
    spread = Estimate(best.accuracy.value - worst.accuracy.value, lo, hi, "measured", int(n[b] + (n[w] if w != b
                                                                                                  else 0)))
    quantiles: dict[str, Estimate] = {}
    if goal == "uniform":
        means = np.where(seen, s / np.where(seen, n, 1), np.nan)
        kept = means[seen]
        qd = np.nanquantile(np.where(seen, post, np.nan), [q / 100 for q in QUANTILES], axis=1)
        for i, q in enumerate(QUANTILES):
            value = float(np.quantile(kept, q / 100))
            lo, hi = _interval(qd[i], value)
            quantiles[f"p{q}"] = Estimate(value, lo, hi, "measured", int(n.sum()))
    return {"variants": out_variants, "best": best, "worst": worst, "spread": spread, "quantiles": quantiles,
            "ties": _tie_ids(variants, ties_b, ties_w)}


def _tie_ids(variants: Sequence[tuple[str, str, Mapping[str, Any]]], best: Sequence[int],
             worst: Sequence[int]) -> dict[str, tuple[str, ...]]:
    return {"best": tuple(variants[i][0] for i in best), "worst": tuple(variants[i][0] for i in worst)}


def _minimize() -> Any:
    try:
        from scipy.optimize import minimize
    except ImportError as exc:  # pragma: no cover - scipy is a dependency
        raise MissingDependencyError("the distribution goal (its logistic model is fitted with scipy)",
                                     "pip install scipy") from exc
    return minimize


def _design(variants: Sequence[tuple[str, str, Mapping[str, Any]]]) -> Any:
    """One-hot columns of the dimension values that differ between variants (variants x features)."""
    np = _np()
    keys = sorted({k for _v, _l, dims in variants for k in dims})
    columns: list[tuple[str, str]] = []
    for key in keys:
        values = sorted({repr(dims.get(key)) for _v, _l, dims in variants})
        if len(values) > 1:
            columns += [(key, value) for value in values]
    x = np.zeros((len(variants), len(columns)))
    for i, (_v, _l, dims) in enumerate(variants):
        for j, (key, value) in enumerate(columns):
            x[i, j] = float(repr(dims.get(key)) == value)
    return x


def _fitted(variants: Sequence[tuple[str, str, Mapping[str, Any]]], n_cases: int, repeats: int,
            outcomes: Mapping[Cell, bool | None], draws: int, *, start: Any = None,
            point_only: bool = False) -> dict[str, Any]:
    """The logistic (Rasch) model with the grid dimensions as covariates: every variant's accuracy estimated.

    ``start``: the parameters to start the optimizer from (the previous round's ``theta``: the trace's fits,
    warm-started, converge in a fraction of the iterations); ``point_only``: only ``point`` and ``theta`` (no
    intervals: what best-worst's choice of variants needs)."""
    np = _np()
    minimize = _minimize()
    k = len(variants)
    obs = [(v, c, r, ok) for (v, c, r), ok in outcomes.items() if ok is not None]
    if not obs:
        return {"variants": [VariantEstimate(vid, label, Estimate(math.nan, math.nan, math.nan, "estimated", 0))
                             for vid, label, _d in variants], "best": None, "worst": None, "spread": None,
                "quantiles": {}}
    x = _design(variants)
    nf = x.shape[1]
    vi = np.array([o[0] for o in obs])
    ci = np.array([o[1] for o in obs])
    y = np.array([float(o[3]) for o in obs])
    # parameters: [b0, beta (nf), u (k), d (n_cases)]
    p = 1 + nf + k + n_cases
    prec = np.concatenate([[PRIORS["b0"] ** -2], np.full(nf, PRIORS["beta"] ** -2), np.full(k, PRIORS["u"] ** -2),
                           np.full(n_cases, PRIORS["d"] ** -2)])

    def split(theta: Any) -> tuple[Any, Any, Any, Any]:
        return theta[0], theta[1:1 + nf], theta[1 + nf:1 + nf + k], theta[1 + nf + k:]

    # The optimizer's loop uses elementwise sums, not BLAS products (``x @ beta``): on these small arrays a
    # threaded BLAS only wakes threads that then compete with the loop for the cores (measured: the whole of
    # ``Run.adaptive()`` several times slower on a busy two-core machine).
    def ability(theta: Any) -> Any:
        b0, beta, u, _d = split(theta)
        return b0 + (x * beta).sum(axis=1) + u  # per variant

    def loss(theta: Any) -> tuple[float, Any]:
        _b0, _beta, _u, d = split(theta)
        z = ability(theta)[vi] - d[ci]
        nll = float(np.sum(np.logaddexp(0.0, z) - y * z))
        r = 1.0 / (1.0 + np.exp(-z)) - y
        per_v = np.bincount(vi, weights=r, minlength=k)
        per_c = np.bincount(ci, weights=r, minlength=n_cases)
        grad = np.concatenate([[per_v.sum()], (x * per_v[:, None]).sum(axis=0), per_v, -per_c]) + prec * theta
        return nll + 0.5 * float(np.sum(prec * theta * theta)), grad

    x0 = np.zeros(p) if start is None or len(start) != p else np.asarray(start, dtype=float)
    fit = minimize(loss, x0, jac=True, method="L-BFGS-B", options={"maxiter": 2000})
    theta = fit.x
    units = n_cases * repeats
    known = np.full((k, units), np.nan)
    for v, c, r, ok in obs:
        known[v, c * repeats + r] = float(ok)
    measured = ~np.isnan(known)
    case_of_unit = np.repeat(np.arange(n_cases), repeats)

    def accuracy(th: Any, sample: Any = None) -> Any:
        """Per variant (``th`` one parameter vector), or draws x variants (``th`` a stack of them)."""
        th = np.atleast_2d(th)
        abil = th[:, :1] + th[:, 1:1 + nf] @ x.T + th[:, 1 + nf:1 + nf + k]  # draws x variants
        diff = th[:, 1 + nf + k:][:, case_of_unit]  # draws x units
        prob = 1.0 / (1.0 + np.exp(-(abil[:, :, None] - diff[:, None, :])))
        filled = prob if sample is None else (sample.random(prob.shape) < prob).astype(float)
        return np.where(measured[None], known[None], filled).mean(axis=2)

    # The point estimate is the plug-in accuracy at the posterior mode. Averaging the probabilities over the
    # posterior of the case difficulties instead (Jensen's correction) was tried on planted matrices: with the
    # difficulties' prior scale above the truth it compresses the estimates towards 50% and the distance between
    # the estimated and the true distribution grew (0.024 -> 0.037 at 10% of a 26 x 200 matrix).
    point = accuracy(theta)[0]
    if point_only:
        return {"point": point, "theta": theta}
    # Laplace approximation: H = J' W J + diag(prec), J the rows' gradients of z.
    z = ability(theta)[vi] - split(theta)[3][ci]
    w = 1.0 / (1.0 + np.exp(-z))
    w = w * (1 - w)
    rng = np.random.default_rng(_SEED)
    if p <= DENSE_LIMIT:
        jac = np.zeros((len(obs), p))
        jac[:, 0] = 1.0
        jac[:, 1:1 + nf] = x[vi]
        jac[np.arange(len(obs)), 1 + nf + vi] = 1.0
        jac[np.arange(len(obs)), 1 + nf + k + ci] = -1.0
        h = (jac * w[:, None]).T @ jac + np.diag(prec)
        chol = np.linalg.cholesky(h)
        noise = rng.standard_normal((draws, p))
        thetas = theta + np.linalg.solve(chol.T, noise.T).T  # N(theta, H^-1)
    else:  # the diagonal of H: the intervals of a very large grid, cheaply
        diag = prec.copy()
        diag[0] += w.sum()
        diag[1:1 + nf] += (x[vi] ** 2 * w[:, None]).sum(axis=0)
        diag[1 + nf:1 + nf + k] += np.bincount(vi, weights=w, minlength=k)
        diag[1 + nf + k:] += np.bincount(ci, weights=w, minlength=n_cases)
        thetas = theta + rng.standard_normal((draws, p)) / np.sqrt(diag)
    # Chunks of draws (the same random stream as one draw at a time) of about 60,000 cells: large enough to
    # vectorize, small enough to stay in cache (measured quicker than one chunk of all 500 draws).
    step = max(1, 60_000 // max(1, k * units))
    acc_draws = np.concatenate([accuracy(thetas[i:i + step], rng) for i in range(0, len(thetas), step)])
    n_v = measured.sum(axis=1)
    out_variants = []
    for i, (vid, label, _d) in enumerate(variants):
        lo, hi = _interval(acc_draws[:, i], float(point[i]))
        out_variants.append(VariantEstimate(vid, label, Estimate(float(point[i]), lo, hi, "estimated", int(n_v[i]))))
    b, wv, ties_b, ties_w = _pick(point, point)
    lo, hi = _interval(acc_draws.max(axis=1) - acc_draws.min(axis=1), float(point[b] - point[wv]))
    spread = Estimate(float(point[b] - point[wv]), lo, hi, "estimated", int(measured.sum()))
    quantiles = _fitted_quantiles(point, acc_draws, int(measured.sum()))
    return {"variants": out_variants, "best": out_variants[b], "worst": out_variants[wv], "spread": spread,
            "quantiles": quantiles, "point": point, "theta": theta, "ties": _tie_ids(variants, ties_b, ties_w)}


def _fitted_quantiles(point: Any, acc_draws: Any, n: int) -> dict[str, Estimate]:
    """Each of ``QUANTILES`` of the variants' point accuracies, its interval from the same quantile of every draw
    (``acc_draws``: draws x variants); ``n`` the measured cells."""
    np = _np()
    qd = np.quantile(acc_draws, [q / 100 for q in QUANTILES], axis=1)
    quantiles = {}
    for i, q in enumerate(QUANTILES):
        value = float(np.quantile(point, q / 100))
        lo, hi = _interval(qd[i], value)
        quantiles[f"p{q}"] = Estimate(value, lo, hi, "estimated", n)
    return quantiles


def estimate_cells(goal: str, variants: Sequence[tuple[str, str, Mapping[str, Any]]], n_cases: int, repeats: int,
                   outcomes: Mapping[Cell, bool | None], *, draws: int = DRAWS, start: Any = None) -> dict[str, Any]:
    """The estimates of ``goal`` from the outcomes of some cells: best, worst, spread, variants, quantiles, the
    variants tied with the best and the worst (``ties``), and ``theta``, the logistic model's parameters where it
    was fitted (``start`` of the next fit). ``uniform`` fits nothing; ``best-worst`` only the model's point."""
    if goal == "distribution":
        return _fitted(variants, n_cases, repeats, outcomes, draws, start=start)
    pick = theta = None
    if goal == "best-worst" and any(ok is not None for ok in outcomes.values()):
        # Which variant is best (worst) is decided on the logistic model's estimate over every case, not on the
        # raw proportions: a variant seen on few cells has seen the first cells of the common order, and an easy
        # (hard) start would otherwise make it look better (worse) than variants measured further.
        fit = _fitted(variants, n_cases, repeats, outcomes, 1, start=start, point_only=True)
        pick, theta = fit["point"], fit["theta"]
    return {**_measured(variants, n_cases * repeats, outcomes, goal, draws, pick), "theta": theta}


def replay(model: str, goal: str, variants: Sequence[tuple[str, str, Mapping[str, Any]]], n_cases: int,
           repeats: int, outcomes: Mapping[Cell, bool | None], *, budget: int, rounds: int | None, seed: int,
           trace: bool = True) -> AdaptiveResult:
    """Replay a model's planner against stored outcomes (``outcomes``: every cell with a result) and estimate.

    Rounds are replayed while every cell they choose has a result; the estimates are those of the cells of the
    rounds replayed (a cell stored by another run but not chosen is not used).
    """
    if goal != "uniform":
        _minimize()  # scipy (and the BLAS it ships) loaded first: the limit is set on the libraries loaded
    with one_blas_thread():
        return _replay(model, goal, variants, n_cases, repeats, outcomes, budget=budget, rounds=rounds, seed=seed,
                       trace=trace)


def _replay(model: str, goal: str, variants: Sequence[tuple[str, str, Mapping[str, Any]]], n_cases: int,
            repeats: int, outcomes: Mapping[Cell, bool | None], *, budget: int, rounds: int | None, seed: int,
            trace: bool) -> AdaptiveResult:
    planner = make_planner(model, len(variants), n_cases, repeats, goal=goal, budget=budget, rounds=rounds,
                           seed=seed)
    assert isinstance(planner, AdaptivePlanner)
    points: list[TracePoint] = []
    theta = None  # the last round's fit: where the next round's starts
    while True:
        cells = planner.next()
        if not cells:
            break
        if any(c not in outcomes for c in cells):
            break
        planner.observe({c: outcomes[c] for c in cells})
        if trace and planner.rounds_done < len(planner.sizes):
            found = estimate_cells(goal, variants, n_cases, repeats, planner.outcomes, draws=TRACE_DRAWS,
                                   start=theta)
            theta = found.get("theta")
            if found["best"] is not None:
                points.append(TracePoint(len(planner.outcomes), found["best"], found["worst"], found["spread"]))
    # The final fit starts from zero, as without a trace: the same numbers with and without one.
    found = estimate_cells(goal, variants, n_cases, repeats, planner.outcomes)
    if trace and found["best"] is not None:
        points.append(TracePoint(len(planner.outcomes), found["best"], found["worst"], found["spread"]))
    return AdaptiveResult(model=model, goal=goal, budget=planner.total, spent=len(planner.outcomes),
                          product=planner.product, rounds=len(planner.sizes), rounds_done=planner.rounds_done,
                          seed=seed, best=found["best"], worst=found["worst"], spread=found["spread"],
                          variants=found["variants"], quantiles=found["quantiles"], trace=points,
                          ties=found.get("ties") or {},
                          common=common_cells(variants, n_cases, repeats, planner.outcomes))


def common_cells(variants: Sequence[tuple[str, str, Mapping[str, Any]]], n_cases: int, repeats: int,
                 outcomes: Mapping[Cell, bool | None], *, resamples: int = 1000) -> CommonCells:
    """Each variant's measured accuracy on the (case, repeat) cells every variant has an outcome on; best, worst
    (ties: first best, last worst) and spread with its bootstrap interval over the cases, and the noise."""
    np = _np()
    k = len(variants)
    known = np.full((k, n_cases, repeats), np.nan)
    for (v, c, r), ok in outcomes.items():
        if ok is not None and v < k and c < n_cases and r < repeats:
            known[v, c, r] = float(ok)
    full = ~np.isnan(known).any(axis=0)  # cases x repeats: every variant has it
    cells, case_mask = int(full.sum()), full.any(axis=1)
    if not cells or not k:
        return CommonCells(cells, int(case_mask.sum()))
    cases = np.flatnonzero(case_mask)
    ok = np.where(full[None], known, 0.0)[:, cases, :].sum(axis=2).T  # cases x variants: correct cells
    n = full[cases].sum(axis=1).astype(float)  # cells per case
    acc = ok.sum(axis=0) / n.sum()
    b, w, ties_b, ties_w = _pick(acc, acc)

    def one(i: int) -> VariantEstimate:
        lo, hi = _wilson(int(round(ok[:, i].sum())), cells)
        return VariantEstimate(variants[i][0], variants[i][1], Estimate(acc[i], lo, hi, "measured", cells))

    rng = np.random.default_rng(_SEED)
    idx = rng.integers(0, len(cases), size=(resamples, len(cases)))
    boot = ok[idx].sum(axis=1) / n[idx].sum(axis=1)[:, None]  # resamples x variants
    spread_boot = boot.max(axis=1) - boot.min(axis=1)
    lo, hi = _interval(spread_boot, float(acc[b] - acc[w]))
    noise = float(np.mean(spread_boot - (boot[:, b] - boot[:, w])))
    return CommonCells(cells, len(cases), one(b), one(w), Estimate(acc[b] - acc[w], lo, hi, "measured", cells * k),
                       noise, _tie_ids(variants, ties_b, ties_w))


_CACHE: dict[tuple[str, tuple[Any, ...]], tuple[bool, dict[str, AdaptiveResult]]] = {}
_CACHE_SIZE = 4


def _state(run_dir: Path) -> tuple[Any, ...]:
    """What changes when a run directory's results or plan change: size and modification time of its store
    (the SQLite file and its write-ahead log) and of ``run.json``."""
    out: list[Any] = []
    for name in ("store.sqlite3", "store.sqlite3-wal", "run.json"):
        try:
            st = (run_dir / name).stat()
        except OSError:
            out.append(None)
            continue
        out.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


def cached_findings(run_dir: Path, trace: bool,
                    compute: Callable[[bool], dict[str, AdaptiveResult]]) -> dict[str, AdaptiveResult]:
    """``compute(trace)``'s results for the run directory in its present state, computed once per state (the
    last few directories kept). A result with its trace also answers a call without one (the final estimates do
    not depend on the trace). The caller copies what it hands out."""
    key = (str(Path(run_dir).resolve()), _state(Path(run_dir)))
    hit = _CACHE.get(key)
    if hit is not None and (hit[0] or not trace):
        found = hit[1]
        return found if trace else {m: replace(r, trace=[]) for m, r in found.items()}
    found = compute(trace)
    if key != (str(Path(run_dir).resolve()), _state(Path(run_dir))):
        return found  # the directory changed while it was read: not kept
    _CACHE.pop(key, None)
    _CACHE[key] = (trace, found)
    while len(_CACHE) > _CACHE_SIZE:
        del _CACHE[next(iter(_CACHE))]
    return found


def run_findings(record: Mapping[str, Any], store: Any, *, trace: bool = True) -> dict[str, AdaptiveResult]:
    """What the latest invocation of a run directory found, per model: {} when it is not an adaptive run.

    ``record`` is the directory's ``run.json`` content, ``store`` its ``RunStore`` (read-only is enough). The
    plan (variants and cases in their order, repeats, models) and the goal, budget, rounds and seed come from
    the latest invocation; the outcomes from the store.
    """
    invocations = record.get("invocations") or []
    last = invocations[-1] if invocations and isinstance(invocations[-1], Mapping) else {}
    config = last.get("config") or {}
    plan = last.get("plan") or {}
    goal = config.get("goal")
    if goal is None or not isinstance(plan, Mapping):
        return {}
    variant_ids = [str(v) for v in plan.get("variants") or ()]
    case_ids = [str(c) for c in plan.get("cases") or ()]
    repeats = int(last.get("repeats") or config.get("repeats") or 1)
    stored = {vid: (label, dims) for vid, label, dims in store.variants().values()}
    variants = [(vid, stored.get(vid, (vid, {}))[0], stored.get(vid, (vid, {}))[1]) for vid in variant_ids]
    v_index = {vid: i for i, vid in enumerate(variant_ids)}
    c_index = {cid: i for i, cid in enumerate(case_ids)}
    out: dict[str, AdaptiveResult] = {}
    for model in last.get("models") or ():
        outcomes: dict[Cell, bool | None] = {}
        for (vid, cid, r), ok in store.model_outcomes(model).items():
            if vid in v_index and cid in c_index and r < repeats:
                outcomes[(v_index[vid], c_index[cid], r)] = ok
        out[model] = replay(model, goal, variants, len(case_ids), repeats, outcomes,
                            budget=int(config.get("budget") or 0) or 1, rounds=config.get("rounds"),
                            seed=int(config.get("plan_seed") or 0), trace=trace)
    return out
