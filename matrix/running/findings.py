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

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
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
                "variants": [v.to_dict() for v in self.variants],
                "trace": [t.to_dict() for t in self.trace]}

    def __repr__(self) -> str:
        def one(v: VariantEstimate | None) -> str:
            return "-" if v is None else f"{v.variant_id} {v.accuracy.value:.1%}"

        spread = "-" if self.spread is None else f"{self.spread.value:.1%}"
        return (f"AdaptiveResult(model={self.model!r}, goal={self.goal!r}, spent={self.spent}/{self.product}, "
                f"best={one(self.best)}, worst={one(self.worst)}, spread={spread})")


# --------------------------------------------------------------------------- estimates


def _np() -> Any:
    import numpy as np

    return np


def _wilson(s: int, n: int) -> tuple[float, float]:
    from promptgrid.matrix.report.stats import wilson_interval

    return wilson_interval(s, n)


def _interval(draws: Any, value: float | None = None) -> tuple[float, float]:
    """The 95% percentile interval of ``draws``, widened to hold ``value`` (a point estimate at 0 or 1 of a
    proportion whose posterior draws never reach the bound)."""
    np = _np()
    lo, hi = (float(x) for x in np.quantile(draws, [0.025, 0.975]))
    if value is not None and not math.isnan(value):
        lo, hi = min(lo, value), max(hi, value)
    return lo, hi


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
    b, w = int(np.nanargmax(mean)), int(np.nanargmin(mean))
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
    return {"variants": out_variants, "best": best, "worst": worst, "spread": spread, "quantiles": quantiles}


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
            outcomes: Mapping[Cell, bool | None], draws: int) -> dict[str, Any]:
    """The logistic (Rasch) model with the grid dimensions as covariates: every variant's accuracy estimated."""
    np = _np()
    try:
        from scipy.optimize import minimize
    except ImportError as exc:  # pragma: no cover - scipy is a dependency
        raise MissingDependencyError("the distribution goal (its logistic model is fitted with scipy)",
                                     "pip install scipy") from exc
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

    def ability(theta: Any) -> Any:
        b0, beta, u, _d = split(theta)
        return b0 + x @ beta + u  # per variant

    def loss(theta: Any) -> tuple[float, Any]:
        _b0, _beta, _u, d = split(theta)
        z = ability(theta)[vi] - d[ci]
        nll = float(np.sum(np.logaddexp(0.0, z) - y * z))
        r = 1.0 / (1.0 + np.exp(-z)) - y
        per_v = np.bincount(vi, weights=r, minlength=k)
        per_c = np.bincount(ci, weights=r, minlength=n_cases)
        grad = np.concatenate([[per_v.sum()], x.T @ per_v, per_v, -per_c]) + prec * theta
        return nll + 0.5 * float(np.sum(prec * theta * theta)), grad

    fit = minimize(loss, np.zeros(p), jac=True, method="L-BFGS-B", options={"maxiter": 2000})
    theta = fit.x
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
    units = n_cases * repeats
    known = np.full((k, units), np.nan)
    for v, c, r, ok in obs:
        known[v, c * repeats + r] = float(ok)
    measured = ~np.isnan(known)
    case_of_unit = np.repeat(np.arange(n_cases), repeats)

    def accuracy(th: Any, sample: Any = None) -> Any:
        prob = 1.0 / (1.0 + np.exp(-(ability(th)[:, None] - split(th)[3][case_of_unit][None, :])))
        filled = prob if sample is None else (sample.random(prob.shape) < prob).astype(float)
        return np.where(measured, known, filled).mean(axis=1)

    acc_draws = np.stack([accuracy(th, rng) for th in thetas])  # draws x variants
    # The point estimate is the plug-in accuracy at the posterior mode. Averaging the probabilities over the
    # posterior of the case difficulties instead (Jensen's correction) was tried on planted matrices: with the
    # difficulties' prior scale above the truth it compresses the estimates towards 50% and the distance between
    # the estimated and the true distribution grew (0.024 -> 0.037 at 10% of a 26 x 200 matrix).
    point = accuracy(theta)
    n_v = measured.sum(axis=1)
    out_variants = []
    for i, (vid, label, _d) in enumerate(variants):
        lo, hi = _interval(acc_draws[:, i], float(point[i]))
        out_variants.append(VariantEstimate(vid, label, Estimate(float(point[i]), lo, hi, "estimated", int(n_v[i]))))
    b, wv = int(np.argmax(point)), int(np.argmin(point))
    lo, hi = _interval(acc_draws.max(axis=1) - acc_draws.min(axis=1), float(point[b] - point[wv]))
    spread = Estimate(float(point[b] - point[wv]), lo, hi, "estimated", int(measured.sum()))
    qd = np.quantile(acc_draws, [q / 100 for q in QUANTILES], axis=1)
    quantiles = {}
    for i, q in enumerate(QUANTILES):
        value = float(np.quantile(point, q / 100))
        lo, hi = _interval(qd[i], value)
        quantiles[f"p{q}"] = Estimate(value, lo, hi, "estimated", int(measured.sum()))
    return {"variants": out_variants, "best": out_variants[b], "worst": out_variants[wv], "spread": spread,
            "quantiles": quantiles, "point": point}


def estimate_cells(goal: str, variants: Sequence[tuple[str, str, Mapping[str, Any]]], n_cases: int, repeats: int,
                   outcomes: Mapping[Cell, bool | None], *, draws: int = DRAWS) -> dict[str, Any]:
    """The estimates of ``goal`` from the outcomes of some cells: best, worst, spread, variants, quantiles."""
    if goal == "distribution":
        return _fitted(variants, n_cases, repeats, outcomes, draws)
    pick = None
    if goal == "best-worst" and any(ok is not None for ok in outcomes.values()):
        # Which variant is best (worst) is decided on the logistic model's estimate over every case, not on the
        # raw proportions: a variant seen on few cells has seen the first cells of the common order, and an easy
        # (hard) start would otherwise make it look better (worse) than variants measured further.
        pick = _fitted(variants, n_cases, repeats, outcomes, 1)["point"]
    return _measured(variants, n_cases * repeats, outcomes, goal, draws, pick)


def replay(model: str, goal: str, variants: Sequence[tuple[str, str, Mapping[str, Any]]], n_cases: int,
           repeats: int, outcomes: Mapping[Cell, bool | None], *, budget: int, rounds: int | None, seed: int,
           trace: bool = True) -> AdaptiveResult:
    """Replay a model's planner against stored outcomes (``outcomes``: every cell with a result) and estimate.

    Rounds are replayed while every cell they choose has a result; the estimates are those of the cells of the
    rounds replayed (a cell stored by another run but not chosen is not used).
    """
    planner = make_planner(model, len(variants), n_cases, repeats, goal=goal, budget=budget, rounds=rounds,
                           seed=seed)
    assert isinstance(planner, AdaptivePlanner)
    points: list[TracePoint] = []
    while True:
        cells = planner.next()
        if not cells:
            break
        if any(c not in outcomes for c in cells):
            break
        planner.observe({c: outcomes[c] for c in cells})
        if trace and planner.rounds_done < len(planner.sizes):
            found = estimate_cells(goal, variants, n_cases, repeats, planner.outcomes, draws=TRACE_DRAWS)
            if found["best"] is not None:
                points.append(TracePoint(len(planner.outcomes), found["best"], found["worst"], found["spread"]))
    found = estimate_cells(goal, variants, n_cases, repeats, planner.outcomes)
    if trace and found["best"] is not None:
        points.append(TracePoint(len(planner.outcomes), found["best"], found["worst"], found["spread"]))
    return AdaptiveResult(model=model, goal=goal, budget=planner.total, spent=len(planner.outcomes),
                          product=planner.product, rounds=len(planner.sizes), rounds_done=planner.rounds_done,
                          seed=seed, best=found["best"], worst=found["worst"], spread=found["spread"],
                          variants=found["variants"], quantiles=found["quantiles"], trace=points)


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
