"""Adaptive evaluation on planted matrices: does a budget of calls find what the full product would?

    .venv/bin/python benchmarks/adaptive.py --verify-only          # plant, write the replay file, exhaustive check
    .venv/bin/python benchmarks/adaptive.py                        # the study (20 seeds x 4 budgets x 3 goals)
    .venv/bin/python benchmarks/adaptive.py --seeds 5 --fractions 0.1,0.33 --json out.json
    .venv/bin/python benchmarks/adaptive.py --offline              # promptgrid's planner + estimates, no runner
    .venv/bin/python benchmarks/adaptive.py --simulate             # the same study on this file's own sampler

Issue 22, item 6. The model is ``replay/PATH``: every (variant, case) answer of
grid ``bfcl_v4`` (26 variants) x ``bfcl:format_sensitivity`` (200 cases) is
planted in a JSONL file, so a run's verdicts are known in advance and each
strategy's estimates can be compared with the truth.

The planted matrix (``plant``, seeded by ``--plant-seed``): a variant's ability
is the sum of one effect per value of each dimension bfcl_v4 varies
(return format, tool-call tag, doc format, prompt format, prompt style) plus a
small per-variant residual; case difficulties are normal; a cell is correct
with probability sigmoid(ability - difficulty), drawn once. The abilities are
then mapped linearly (the additive structure kept) so the expected per-variant
accuracies span 35%..90%, about BFCL V4's format-sensitivity spread. The truth
is the realized 26 x 200 matrix: a variant's true accuracy is its row mean;
true best, worst and spread follow from those.

The answers (``answer_text``): a correct cell is the case's ground truth
(first acceptable value of each parameter, ``""``-first optional parameters
left out, nested dicts and lists of dicts made concrete the same way) written
by ``promptgrid.matrix.calling.format_calls`` -- the writer the ``fake/``
client uses for its constrained answers -- in the variant's return format and
tag; a wrong cell is the same with every function name + ``_x``
(``simple_function_checker:wrong_func_name``). ``--verify`` runs the whole
product through replay once and counts verdicts that differ from the plant.

The study: for each budget (``--fractions`` of the 5,200 cells), seed and goal
(``best-worst``, ``distribution``, and ``uniform``: uniform random cells,
per-variant observed means -- the baseline), one run

    pg.run("bfcl_v4", "bfcl:format_sensitivity", models=["replay/PATH"], run_dir=FRESH,
           goal=GOAL, budget=N, seed=SEED, progress=False).adaptive()

and per (goal, budget), over the seeds:

- best ok: % of seeds whose reported best has a true accuracy within 2 points
  of the true maximum (the true best itself included); worst ok likewise;
  both ok: best and worst in the same seed;
- spread error: |estimated spread - true spread| in points, median and p90;
- W1: the Wasserstein-1 distance (``scipy.stats.wasserstein_distance``, in
  points) between the estimated per-variant accuracies and the true ones,
  median;
- calls spent (median) and wall seconds per run (median).

Targets (issue 22): at 33%, best and worst within 2 points in >= 90% of the
seeds and median spread error <= 3 points (goal best-worst); at 10%, goal
distribution's median W1 at most half of uniform's.

``--offline`` runs promptgrid's own planners and estimates
(``matrix.running.findings.replay``, what ``Run.adaptive`` computes from a
run's store) on the planted outcomes directly: no prompts, no replay client,
no scoring -- the same numbers as the real runs where the runner sends what
the planner chooses, in seconds. ``--simulate`` runs the same study without promptgrid's planner, on
``SimulatedSampler`` below (Thompson sampling, balanced sampling + a logistic
model, uniform), which returns results of the same shape: it checks the
metric code and gives a reference for what the real planner should reach.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parents[1]

GRID = "bfcl_v4"
DATASET = "bfcl:format_sensitivity"
GOALS = ("best-worst", "distribution", "uniform")
FRACTIONS = (0.05, 0.10, 0.20, 0.33)
TOLERANCE = 0.02
"""'Found': the chosen variant's true accuracy within 2 points of the true best (worst)."""

DIMENSIONS = ("return_format", "tool_call_tag", "doc_format", "prompt_format", "prompt_style")
"""The dimensions bfcl_v4 varies (the others are the same for all 26 variants)."""
EFFECT_SD = {"return_format": 0.8, "tool_call_tag": 0.35, "doc_format": 0.35, "prompt_format": 0.3,
             "prompt_style": 0.5}
"""Spread (logit units, before the rescaling to ``ACCURACY_RANGE``) of each dimension value's effect."""
RESIDUAL_SD = 0.15
DIFFICULTY_SD = 1.5
ACCURACY_RANGE = (0.35, 0.90)
"""Expected accuracy of the weakest and the strongest planted variant."""


# --------------------------------------------------------------------------- planted matrix

@dataclass(frozen=True)
class Planted:
    """A realized variants x cases 0/1 matrix and what it was drawn from."""

    variant_ids: tuple[str, ...]
    case_ids: tuple[str, ...]
    correct: np.ndarray
    """bool, shape (variants, cases): the planted verdicts."""
    ability: np.ndarray
    difficulty: np.ndarray
    effects: dict[str, dict[str, float]]
    """dimension -> value -> effect (logit units, after rescaling)."""

    @property
    def accuracy(self) -> dict[str, float]:
        """Each variant's true accuracy: its row mean."""
        return dict(zip(self.variant_ids, self.correct.mean(axis=1).tolist(), strict=True))

    @property
    def product(self) -> int:
        return int(self.correct.size)

    def truth(self) -> Truth:
        return Truth.of(self.accuracy)


@dataclass(frozen=True)
class Truth:
    accuracy: dict[str, float]
    best: str
    worst: str
    spread: float

    @classmethod
    def of(cls, accuracy: Mapping[str, float]) -> Truth:
        acc = dict(accuracy)
        best = max(acc, key=acc.__getitem__)
        worst = min(acc, key=acc.__getitem__)
        return cls(acc, best, worst, acc[best] - acc[worst])


def _value(variant: Any, dim: str) -> str:
    v = getattr(variant, dim)
    return str(getattr(v, "value", v))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _expected_accuracy_inverse(target: float, difficulty: np.ndarray) -> float:
    """The ability whose mean sigmoid(ability - difficulty) over the cases is ``target`` (bisection)."""
    lo, hi = -20.0, 20.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if float(_sigmoid(mid - difficulty).mean()) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def plant(variants: Sequence[Any], cases: Sequence[Any], seed: int = 0, *,
          accuracy_range: tuple[float, float] = ACCURACY_RANGE, residual_sd: float = RESIDUAL_SD,
          difficulty_sd: float = DIFFICULTY_SD) -> Planted:
    """The planted matrix for these variants and cases (see the module docstring)."""
    rng = np.random.default_rng(seed)
    effects: dict[str, dict[str, float]] = {}
    raw = np.zeros(len(variants))
    for dim in DIMENSIONS:
        values = sorted({_value(v, dim) for v in variants})
        draws = rng.normal(0.0, EFFECT_SD[dim], size=len(values)) if len(values) > 1 else np.zeros(1)
        effects[dim] = dict(zip(values, draws.tolist(), strict=True))
        raw += np.array([effects[dim][_value(v, dim)] for v in variants])
    raw += rng.normal(0.0, residual_sd, size=len(variants))
    difficulty = rng.normal(0.0, difficulty_sd, size=len(cases))
    lo, hi = (_expected_accuracy_inverse(p, difficulty) for p in accuracy_range)
    if len(variants) > 1 and raw.max() > raw.min():
        scale = (hi - lo) / (raw.max() - raw.min())
        ability = lo + (raw - raw.min()) * scale
        effects = {d: {k: e * scale for k, e in vals.items()} for d, vals in effects.items()}
    else:
        ability = np.full(len(variants), (lo + hi) / 2)
    p = _sigmoid(ability[:, None] - difficulty[None, :])
    correct = rng.random(p.shape) < p
    return Planted(tuple(v.id for v in variants), tuple(c.id for c in cases), correct, ability, difficulty, effects)


# --------------------------------------------------------------------------- answers

def _concrete(value: Any, spec: Mapping[str, Any] | None) -> Any:
    """A ground-truth value made concrete: dicts of acceptable-value lists -> first values, recursively."""
    spec = spec or {}
    if isinstance(value, dict):
        props = spec.get("properties") or {}
        out = {}
        for key, values in value.items():
            first = values[0] if isinstance(values, list) and values else values
            if isinstance(first, str) and first == "":
                continue  # optional, "" = may be left out
            out[key] = _concrete(first, props.get(key))
        return out
    if isinstance(value, list) and isinstance(spec.get("items"), dict):
        return [_concrete(v, spec["items"]) for v in value]
    return value


def ground_truth_calls(case: Any, *, wrong: bool = False) -> list[dict[str, dict[str, Any]]]:
    """The case's ground truth as concrete calls; ``wrong``: every function name + ``_x``."""
    calls = []
    for gt in case.ground_truth:
        ((name, answer),) = gt.items()
        function = next((f for f in case.functions if f.get("name") == name), {})
        props = (function.get("parameters") or {}).get("properties") or {}
        params = {}
        for key, values in answer.items():
            first = values[0] if values else ""
            if isinstance(first, str) and first == "":
                continue
            params[key] = _concrete(first, props.get(key))
        calls.append({name + ("_x" if wrong else ""): params})
    return calls


def answer_text(variant: Any, case: Any, correct: bool) -> str:
    """The planted answer: the ground truth (or the wrong-name version) in the variant's format."""
    from promptgrid.matrix.calling import format_calls

    if not case.ground_truth:
        raise ValueError(f"case {case.id!r} has no ground truth: no call to write")
    return format_calls(ground_truth_calls(case, wrong=not correct), variant.return_format, variant.tool_call_tag)


def write_replay(planted: Planted, variants: Sequence[Any], cases: Sequence[Any], path: Path) -> Path:
    """One score-file line per cell (variant_id, case_id, response)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as out:
        for i, variant in enumerate(variants):
            for j, case in enumerate(cases):
                line = {"variant_id": variant.id, "case_id": case.id,
                        "response": answer_text(variant, case, bool(planted.correct[i, j]))}
                out.write(json.dumps(line, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


def score_mismatches(planted: Planted, variants: Sequence[Any], cases: Sequence[Any],
                     variant_ids: Iterable[str] | None = None) -> list[tuple[str, str, bool, bool | None]]:
    """(variant, case, planted, scored) for every cell whose ``pg.score`` verdict differs (no run)."""
    import promptgrid as pg

    wanted = set(variant_ids) if variant_ids is not None else None
    out = []
    for i, variant in enumerate(variants):
        if wanted is not None and variant.id not in wanted:
            continue
        for j, case in enumerate(cases):
            want = bool(planted.correct[i, j])
            got = pg.score(answer_text(variant, case, want), variant, case).valid
            if got is not want:
                out.append((variant.id, case.id, want, got))
    return out


def replay_model(path: Path) -> str:
    return f"replay/{path.resolve()}"  # replay//abs/path.jsonl for an absolute path


def verify(planted: Planted, path: Path, workdir: Path) -> tuple[list[tuple[str, str, bool, Any]], float, int]:
    """The exhaustive replay run: (mismatches (variant, case, planted, verdict), wall seconds, rows)."""
    import promptgrid as pg

    run_dir = Path(tempfile.mkdtemp(prefix="verify-", dir=workdir))
    try:
        start = time.perf_counter()
        run = pg.run(GRID, DATASET, models=[replay_model(path)], run_dir=run_dir, progress=False)
        rows = run.results()
        wall = time.perf_counter() - start
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    index = {(v, c): (i, j) for i, v in enumerate(planted.variant_ids) for j, c in enumerate(planted.case_ids)}
    seen = set()
    bad: list[tuple[str, str, bool, Any]] = []
    for row in rows:
        key = (row.variant_id, row.case_id)
        seen.add(key)
        i, j = index[key]
        want = bool(planted.correct[i, j])
        if row.valid is not want:
            bad.append((row.variant_id, row.case_id, want, row.valid if row.status == "done" else row.error))
    for key in index.keys() - seen:
        bad.append((key[0], key[1], bool(planted.correct[index[key]]), "no row"))
    return bad, wall, len(rows)


# --------------------------------------------------------------------------- metrics

@dataclass(frozen=True)
class RunMetrics:
    goal: str
    fraction: float
    seed: int
    best_ok: bool
    worst_ok: bool
    best_gap: float
    """True best accuracy - the chosen best's true accuracy, in points (0: the true best)."""
    worst_gap: float
    spread_error: float
    """|estimated spread - true spread|, points."""
    w1: float
    """Wasserstein-1 between estimated and true per-variant accuracies, points."""
    quantile_error: float
    """Mean |estimated - true| over the reported quantiles (p5..p95), points (nan if none)."""
    spent: int
    wall_s: float


def _val(estimate: Any) -> float:
    return float(estimate.value if hasattr(estimate, "value") else estimate)


def _maybe(estimate: Any) -> float | None:
    """The estimate's value; ``None`` when it has none (no estimate for that variant, or NaN)."""
    value = getattr(estimate, "value", estimate)
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def true_quantiles(truth: Truth, keys: Iterable[str]) -> dict[str, float]:
    values = np.array(sorted(truth.accuracy.values()))
    return {k: float(np.quantile(values, int(k.removeprefix("p")) / 100)) for k in keys}


def measure(result: Any, truth: Truth, *, goal: str, fraction: float, seed: int, wall_s: float) -> RunMetrics:
    """One run's metrics (``result``: an AdaptiveResult or anything of its shape)."""
    from scipy.stats import wasserstein_distance

    acc = truth.accuracy
    top, bottom = acc[truth.best], acc[truth.worst]
    best_gap = (top - acc[result.best.variant_id]) * 100 if result.best is not None else math.inf
    worst_gap = (acc[result.worst.variant_id] - bottom) * 100 if result.worst is not None else math.inf
    spread = _maybe(result.spread) if result.spread is not None else None
    estimated = [x for x in (_maybe(v.accuracy) for v in result.variants) if x is not None]
    w1 = wasserstein_distance(estimated, list(acc.values())) * 100 if estimated else math.nan
    quantiles = dict(getattr(result, "quantiles", None) or {})
    if quantiles:
        tq = true_quantiles(truth, quantiles)
        q_err = statistics.fmean(abs(_val(quantiles[k]) - tq[k]) for k in quantiles) * 100
    else:
        q_err = math.nan
    eps = 1e-9
    return RunMetrics(goal, fraction, seed,
                      best_ok=best_gap <= TOLERANCE * 100 + eps, worst_ok=worst_gap <= TOLERANCE * 100 + eps,
                      best_gap=best_gap, worst_gap=worst_gap,
                      spread_error=abs(spread - truth.spread) * 100 if spread is not None else math.nan,
                      w1=w1, quantile_error=q_err,
                      spent=int(result.spent), wall_s=wall_s)


def _pct(values: Sequence[float], q: float) -> float:
    clean = [v for v in values if v == v]
    return float(np.quantile(clean, q)) if clean else math.nan


def summarize(rows: Sequence[RunMetrics]) -> dict[str, Any]:
    """Aggregates over the seeds of one (goal, fraction)."""
    n = len(rows)
    return {
        "seeds": n,
        "best_ok_pct": 100 * sum(r.best_ok for r in rows) / n,
        "worst_ok_pct": 100 * sum(r.worst_ok for r in rows) / n,
        "both_ok_pct": 100 * sum(r.best_ok and r.worst_ok for r in rows) / n,
        "spread_error_median": _pct([r.spread_error for r in rows], 0.5),
        "spread_error_p90": _pct([r.spread_error for r in rows], 0.9),
        "w1_median": _pct([r.w1 for r in rows], 0.5),
        "quantile_error_median": _pct([r.quantile_error for r in rows], 0.5),
        "spent_median": _pct([r.spent for r in rows], 0.5),
        "wall_s_median": _pct([r.wall_s for r in rows], 0.5),
    }


def _f(x: float, digits: int = 1) -> str:
    return "n/a" if x != x else f"{x:.{digits}f}"


def tables(summary: Mapping[tuple[str, float], Mapping[str, Any]], goals: Sequence[str],
           fractions: Sequence[float], product: int, floors: Mapping[float, float] | None = None,
           known: Mapping[float, float] | None = None) -> str:
    """Markdown: per goal, one row per budget, each cell 'goal / uniform'; then the targets."""
    floors = floors or {}
    known = known or {}
    base = "uniform" if "uniform" in goals else None
    others = [g for g in goals if g != "uniform"] or ([base] if base else [])

    def pair(goal: str, fr: float, fmt: Callable[[Mapping[str, Any]], str]) -> str:
        cells = []
        for g in [goal] + ([base] if base and base != goal else []):
            s = summary.get((g, fr))
            cells.append(fmt(s) if s else "-")
        return " / ".join(cells)

    ok = lambda key: (lambda s: _f(s[key], 0))  # noqa: E731
    common: list[tuple[str, Callable[[Mapping[str, Any]], str]]] = [
        ("spent", lambda s: _f(s["spent_median"], 0)),
        ("s/run", lambda s: _f(s["wall_s_median"], 1)),
    ]
    columns: dict[str, list[tuple[str, Callable[[Mapping[str, Any]], str]]]] = {
        "best-worst": [("best ok %", ok("best_ok_pct")), ("worst ok %", ok("worst_ok_pct")),
                       ("both ok %", ok("both_ok_pct")),
                       ("spread err med", lambda s: _f(s["spread_error_median"])),
                       ("spread err p90", lambda s: _f(s["spread_error_p90"])),
                       ("W1 med", lambda s: _f(s["w1_median"], 2))],
        "distribution": [("W1 med", lambda s: _f(s["w1_median"], 2)),
                         ("quantile err med", lambda s: _f(s["quantile_error_median"], 2)),
                         ("spread err med", lambda s: _f(s["spread_error_median"])),
                         ("both ok %", ok("both_ok_pct"))],
    }
    out = []
    for goal in others:
        cols = columns.get(goal, columns["best-worst"]) + common
        who = f"{goal} / {base}" if base and goal != base else goal
        out.append(f"\n### goal {goal} (cells: {who})\n")
        header = ["budget", "calls"] + [name for name, _ in cols]
        if goal == "distribution":
            header += ["W1 ratio", "W1 known d", "W1 floor"]
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "---|" * len(header))
        for fr in fractions:
            row = [f"{fr:.0%}", str(round(fr * product))] + [pair(goal, fr, fmt) for _, fmt in cols]
            if goal == "distribution":
                d, u = summary.get((goal, fr)), summary.get(("uniform", fr))
                row.append(_f(d["w1_median"] / u["w1_median"], 2) if d and u and u["w1_median"] else "-")
                row.append(_f(known.get(fr, math.nan), 2))
                row.append(_f(floors.get(fr, math.nan), 2))
            out.append("| " + " | ".join(row) + " |")
    if "distribution" in goals:
        out.append("\nW1 ratio: distribution / uniform (target <= 0.50 at 10%). W1 floor: median W1 of an oracle that "
                   "knows every cell's probability, given uniform random cells of the same budget: observed cells "
                   "as observed, the others at their probability (what no estimator can remove: the unobserved "
                   "cells' own noise in the realized row means). W1 known d: the distribution goal's model on its "
                   "own cells, handed the true case difficulties (the rest fitted as shipped): what a perfect "
                   "difficulty estimate would leave.")
    out.append("\n### targets\n")
    out.extend(target_lines(summary, fractions))
    return "\n".join(out)


def oracle_floor(planted: Planted, budget: int, seeds: int) -> float:
    """Median W1 (points) of the oracle estimate (see ``tables``) over ``seeds`` uniform draws of cells."""
    from scipy.stats import wasserstein_distance

    p = _sigmoid(planted.ability[:, None] - planted.difficulty[None, :])
    true = planted.correct.mean(axis=1)
    out = []
    for seed in range(seeds):
        seen = np.zeros(planted.correct.shape, dtype=bool)
        seen.flat[np.random.default_rng(seed).choice(seen.size, size=budget, replace=False)] = True
        out.append(wasserstein_distance(np.where(seen, planted.correct, p).mean(axis=1), true) * 100)
    return float(np.median(out))


def distribution_cells(planted: Planted, budget: int, seed: int, model: str) -> list[tuple[int, int, int]]:
    """The cells promptgrid's ``distribution`` planner chooses at this budget and seed (its choice does not
    depend on the outcomes, so no outcome is needed to replay it)."""
    from promptgrid.matrix.running.planning import make_planner

    variants, cases = planted.correct.shape
    planner = make_planner(model, variants, cases, 1, goal="distribution", budget=budget, seed=seed)
    cells: list[tuple[int, int, int]] = []
    while chosen := planner.next():
        cells += chosen
        planner.observe(dict.fromkeys(chosen, True))
    return cells


def known_difficulty_w1(planted: Planted, variants: Sequence[Any], budget: int, seeds: int, model: str) -> float:
    """Median W1 (points) of the distribution goal's logistic model -- same covariates, same priors, same cells
    -- when it is handed the true case difficulties instead of estimating them: a reference for how much of the
    distance a better difficulty estimate could remove. The rest (abilities from the cells) is fitted as shipped."""
    from scipy.optimize import minimize
    from scipy.stats import wasserstein_distance

    from promptgrid.matrix.running.findings import PRIORS, _design

    x = _design([(v.id, v.id, v.dimensions()) for v in variants])
    k, nf = x.shape
    d = planted.difficulty
    true = planted.correct.mean(axis=1)
    prec = np.concatenate([[PRIORS["b0"] ** -2], np.full(nf, PRIORS["beta"] ** -2), np.full(k, PRIORS["u"] ** -2)])
    out = []
    for seed in range(seeds):
        cells = distribution_cells(planted, budget, seed, model)
        vi = np.array([c[0] for c in cells])
        ci = np.array([c[1] for c in cells])
        y = planted.correct[vi, ci].astype(float)

        def loss(theta: np.ndarray, vi: np.ndarray = vi, ci: np.ndarray = ci, y: np.ndarray = y) -> Any:
            ability = theta[0] + x @ theta[1:1 + nf] + theta[1 + nf:]
            z = ability[vi] - d[ci]
            r = _sigmoid(z) - y
            per_v = np.bincount(vi, weights=r, minlength=k)
            grad = np.concatenate([[per_v.sum()], x.T @ per_v, per_v]) + prec * theta
            return float(np.sum(np.logaddexp(0.0, z) - y * z) + 0.5 * np.sum(prec * theta * theta)), grad

        theta = minimize(loss, np.zeros(1 + nf + k), jac=True, method="L-BFGS-B").x
        ability = theta[0] + x @ theta[1:1 + nf] + theta[1 + nf:]
        seen = np.zeros(planted.correct.shape, dtype=bool)
        seen[vi, ci] = True
        est = np.where(seen, planted.correct, _sigmoid(ability[:, None] - d[None, :])).mean(axis=1)
        out.append(wasserstein_distance(est, true) * 100)
    return float(np.median(out))


def target_lines(summary: Mapping[tuple[str, float], Mapping[str, Any]], fractions: Sequence[float]) -> list[str]:
    lines = []
    third = next((f for f in fractions if abs(f - 0.33) < 1e-9), None)
    tenth = next((f for f in fractions if abs(f - 0.10) < 1e-9), None)
    bw = summary.get(("best-worst", third)) if third is not None else None
    if bw:
        ok = bw["both_ok_pct"] >= 90 and bw["spread_error_median"] <= 3
        lines.append(f"- 33%, best-worst: best and worst within 2 points in {bw['both_ok_pct']:.0f}% of "
                     f"{bw['seeds']} seeds (target >= 90%; best {bw['best_ok_pct']:.0f}%, worst "
                     f"{bw['worst_ok_pct']:.0f}%), median spread error {bw['spread_error_median']:.2f} points "
                     f"(target <= 3): {'MET' if ok else 'NOT MET'}")
    dist = summary.get(("distribution", tenth)) if tenth is not None else None
    uni = summary.get(("uniform", tenth)) if tenth is not None else None
    if dist and uni:
        ratio = dist["w1_median"] / uni["w1_median"] if uni["w1_median"] else math.inf
        lines.append(f"- 10%, distribution: median W1 {dist['w1_median']:.2f} points vs uniform "
                     f"{uni['w1_median']:.2f} (ratio {ratio:.2f}, target <= 0.50): "
                     f"{'MET' if ratio <= 0.5 else 'NOT MET'}")
    return lines or ["- (the targets need fractions 0.33 and 0.1 and the goals best-worst, distribution, uniform)"]


# --------------------------------------------------------------------------- the real runs

def adaptive_api_ready() -> str | None:
    """``None`` when ``pg.run`` takes goal and budget and ``Run.adaptive`` exists; else what is missing."""
    import promptgrid as pg

    params = inspect.signature(pg.run).parameters
    missing = [p for p in ("goal", "budget") if p not in params]
    if not hasattr(pg.Run, "adaptive"):
        missing.append("Run.adaptive()")
    return ", ".join(missing) or None


def study_model(path: Path) -> str:
    """The model string of the study's runs: ``replay/`` + the file's name, read from its folder (the runs work
    there). The planners seed their draws from the seed *and the model string*, so a path that changed with the
    work folder would change every run's cells; this one does not."""
    return f"replay/{path.name}"


def run_real(path: Path, goal: str, budget: int, seed: int, workdir: Path, keep: bool = False) -> Any:
    """One adaptive run through replay: the model's AdaptiveResult.

    The planner's seed: ``pg.run(seed=...)`` where it takes one, else ``params={"seed": ...}`` (which seeds the
    planner too, ``RunConfig.plan_seed``; replay ignores the params). Runs in ``path``'s folder
    (``study_model``)."""
    import promptgrid as pg

    seeding: dict[str, Any] = ({"seed": seed} if "seed" in inspect.signature(pg.run).parameters
                               else {"params": {"seed": seed}})
    run_dir = Path(tempfile.mkdtemp(prefix=f"{goal}-{budget}-{seed}-", dir=workdir)).resolve()
    here = Path.cwd()
    try:
        os.chdir(path.resolve().parent)
        run = pg.run(GRID, DATASET, models=[study_model(path)], run_dir=run_dir, goal=goal, budget=budget,
                     progress=False, **seeding)
        results = run.adaptive(trace=False) if "trace" in inspect.signature(run.adaptive).parameters \
            else run.adaptive()
    finally:
        os.chdir(here)
        if not keep:
            shutil.rmtree(run_dir, ignore_errors=True)
    if len(results) != 1:
        raise RuntimeError(f"expected one model's AdaptiveResult, got {list(results)}")
    return next(iter(results.values()))


def run_offline(planted: Planted, variants: Sequence[Any], goal: str, budget: int, seed: int, model: str) -> Any:
    """promptgrid's own planner and estimates (``findings.replay``) on the planted outcomes, without the runner
    (no prompts, no replay client, no scoring): what ``Run.adaptive`` computes from a run's store, given that the
    runner sends the cells the planner chooses. ``--offline``."""
    from promptgrid.matrix.running.findings import replay

    outcomes = {(i, j, 0): bool(planted.correct[i, j]) for i in range(planted.correct.shape[0])
                for j in range(planted.correct.shape[1])}
    described = [(v.id, v.label if isinstance(v.label, str) else v.id, v.dimensions()) for v in variants]
    return replay(model, goal, described, planted.correct.shape[1], 1, outcomes, budget=budget, rounds=None,
                  seed=seed, trace=False)


# --------------------------------------------------------------------------- simulated sampler (--simulate)
# Not promptgrid's planner: a stand-in of this benchmark's own, returning results of the
# AdaptiveResult shape, to check the metric code and give a reference for the real runs.

@dataclass(frozen=True)
class SimEstimate:
    value: float
    low: float
    high: float
    measured: bool = True


@dataclass(frozen=True)
class SimVariantEstimate:
    variant_id: str
    accuracy: SimEstimate
    n: int


@dataclass(frozen=True)
class SimPick:
    variant_id: str
    accuracy: SimEstimate


@dataclass(frozen=True)
class SimResult:
    best: SimPick
    worst: SimPick
    spread: SimEstimate
    variants: list[SimVariantEstimate]
    quantiles: dict[str, SimEstimate]
    spent: int
    product: int

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


QUANTILES = ("p5", "p10", "p25", "p50", "p75", "p90", "p95")


@dataclass
class SimulatedSampler:
    """Reads cells of the planted matrix (no promptgrid run) under one goal and budget."""

    planted: Planted
    design: np.ndarray
    """(variants, features) one-hot of the dimension values (for the distribution goal's model)."""
    rng: np.random.Generator = field(default_factory=np.random.default_rng)

    @classmethod
    def of(cls, planted: Planted, variants: Sequence[Any], seed: int) -> SimulatedSampler:
        columns = []
        for dim in DIMENSIONS:
            values = sorted({_value(v, dim) for v in variants})
            for value in values[1:]:  # first value is the reference level
                columns.append([1.0 if _value(v, dim) == value else 0.0 for v in variants])
        design = np.array(columns, dtype=float).T if columns else np.zeros((len(variants), 0))
        return cls(planted, design, np.random.default_rng(seed))

    def run(self, goal: str, budget: int) -> SimResult:
        V, C = self.planted.correct.shape
        budget = min(budget, V * C)
        seen = np.zeros((V, C), dtype=bool)
        if goal == "uniform":
            flat = self.rng.choice(V * C, size=budget, replace=False)
            seen.flat[flat] = True
        elif goal == "best-worst":
            self._thompson(seen, budget)
        elif goal == "distribution":
            self._balanced(seen, budget)
        else:
            raise ValueError(f"unknown goal {goal!r}")
        if goal == "distribution":
            values = self._model_estimates(seen)
        else:
            values = self._observed_means(seen)
        return self._result(seen, values)

    # -- sampling
    def _draw_case(self, seen: np.ndarray, v: int) -> None:
        free = np.flatnonzero(~seen[v])
        if free.size:
            seen[v, self.rng.choice(free)] = True

    def _thompson(self, seen: np.ndarray, budget: int) -> None:
        V, C = seen.shape
        correct = self.planted.correct
        start = min(max(2, budget // (4 * V)), C)  # a first balanced round
        for v in range(V):
            seen[v, self.rng.choice(C, size=start, replace=False)] = True
        spent = int(seen.sum())
        while spent < budget:
            s = (correct & seen).sum(axis=1)
            n = seen.sum(axis=1)
            draw = self.rng.beta(1 + s, 1 + n - s)
            full = n >= C
            for pick in (np.argmax(np.where(full, -np.inf, draw)), np.argmin(np.where(full, np.inf, draw))):
                if spent < budget and not full[pick]:
                    self._draw_case(seen, int(pick))
                    spent += 1

    def _balanced(self, seen: np.ndarray, budget: int) -> None:
        """Every variant about budget / V cells, every case about budget / C: random permutations of the
        cases dealt to the variants in turn (random overlaps link the variants for the model)."""
        V, C = seen.shape
        spent = 0
        deck: list[int] = []
        while spent < budget:
            for v in self.rng.permutation(V):
                if spent >= budget:
                    break
                for _ in range(C):  # the next case of the deck this variant has not seen
                    if not deck:
                        deck = self.rng.permutation(C).tolist()
                    j = deck.pop()
                    if not seen[v, j]:
                        seen[v, j] = True
                        spent += 1
                        break

    # -- estimates
    def _observed_means(self, seen: np.ndarray) -> np.ndarray:
        n = seen.sum(axis=1)
        s = (self.planted.correct & seen).sum(axis=1)
        overall = s.sum() / max(1, n.sum())
        return np.where(n > 0, s / np.maximum(n, 1), overall)

    def _model_estimates(self, seen: np.ndarray) -> np.ndarray:
        """Logistic model: logit P = mu + dimension effects + variant residual - case difficulty (L2 on the
        residuals and difficulties); a variant's accuracy = observed cells + predicted unobserved ones."""
        from scipy.optimize import minimize

        V, C = seen.shape
        vi, ci = np.nonzero(seen)
        y = self.planted.correct[vi, ci].astype(float)
        X = self.design
        F = X.shape[1]
        lam_res, lam_case, lam_fx = 4.0, 0.5, 0.01

        def unpack(theta: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
            return theta[0], theta[1:1 + F], theta[1 + F:1 + F + V], theta[1 + F + V:]

        def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
            mu, beta, res, diff = unpack(theta)
            ability = mu + X @ beta + res
            z = ability[vi] - diff[ci]
            p = _sigmoid(z)
            nll = float(np.sum(np.logaddexp(0, z) - y * z))
            pen = lam_fx * beta @ beta + lam_res * res @ res + lam_case * diff @ diff
            g = p - y
            g_ability = np.bincount(vi, weights=g, minlength=V)
            grad = np.concatenate([[g_ability.sum()], X.T @ g_ability + 2 * lam_fx * beta,
                                   g_ability + 2 * lam_res * res,
                                   -np.bincount(ci, weights=g, minlength=C) + 2 * lam_case * diff])
            return nll + float(pen), grad

        theta0 = np.zeros(1 + F + V + C)
        fit = minimize(loss, theta0, jac=True, method="L-BFGS-B")
        mu, beta, res, diff = unpack(fit.x)
        p = _sigmoid((mu + X @ beta + res)[:, None] - diff[None, :])
        filled = np.where(seen, self.planted.correct, p)
        return filled.mean(axis=1)

    def _result(self, seen: np.ndarray, values: np.ndarray) -> SimResult:
        n = seen.sum(axis=1)
        ids = self.planted.variant_ids
        ests = []
        for i, vid in enumerate(ids):
            half = 1.96 * math.sqrt(max(values[i] * (1 - values[i]), 1e-6) / max(1, n[i]))
            ests.append(SimVariantEstimate(vid, SimEstimate(float(values[i]), max(0.0, values[i] - half),
                                                            min(1.0, values[i] + half), bool(n[i])), int(n[i])))
        b, w = int(np.argmax(values)), int(np.argmin(values))
        spread = float(values[b] - values[w])
        quantiles = {q: SimEstimate(float(np.quantile(values, int(q[1:]) / 100)), math.nan, math.nan)
                     for q in QUANTILES}
        return SimResult(SimPick(ids[b], ests[b].accuracy), SimPick(ids[w], ests[w].accuracy),
                         SimEstimate(spread, math.nan, math.nan), ests, quantiles, int(seen.sum()),
                         int(seen.size))


# --------------------------------------------------------------------------- main

def load() -> tuple[list[Any], list[Any]]:
    import promptgrid as pg

    variants = list(pg.load_grid(GRID).variants)
    cases = list(pg.load_dataset(DATASET))
    return variants, cases


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--seeds", type=int, default=20, help="seeds 0..N-1 per (goal, budget) (default 20)")
    ap.add_argument("--fractions", type=_floats, default=list(FRACTIONS),
                    help="budgets as fractions of the product, comma-separated (default 0.05,0.1,0.2,0.33)")
    ap.add_argument("--goals", type=lambda s: [g.strip() for g in s.split(",") if g.strip()], default=list(GOALS),
                    help="comma-separated, of best-worst, distribution, uniform (default all)")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="where the replay file and the run folders go (default: a fresh temporary folder)")
    ap.add_argument("--plant-seed", type=int, default=0, help="seed of the planted matrix (default 0)")
    ap.add_argument("--residual-sd", type=float, default=RESIDUAL_SD,
                    help=f"per-variant residual, logit units before rescaling (default {RESIDUAL_SD})")
    ap.add_argument("--difficulty-sd", type=float, default=DIFFICULTY_SD,
                    help=f"case difficulty spread, logit units (default {DIFFICULTY_SD})")
    ap.add_argument("--json", type=Path, default=None, help="write per-run metrics and summaries here")
    ap.add_argument("--simulate", action="store_true",
                    help="run the study on this file's own sampler instead of pg.run (no promptgrid planner)")
    ap.add_argument("--offline", action="store_true",
                    help="promptgrid's planner and estimates on the planted outcomes, without the runner")
    ap.add_argument("--verify", action="store_true", help="first run the whole product through replay once")
    ap.add_argument("--verify-only", action="store_true", help="only the exhaustive check")
    ap.add_argument("--keep", action="store_true", help="keep the run folders")
    args = ap.parse_args(argv)
    for g in args.goals:
        if g not in GOALS:
            ap.error(f"unknown goal {g!r}; use {', '.join(GOALS)}")

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="pg-adaptive-"))
    workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    variants, cases = load()
    planted = plant(variants, cases, seed=args.plant_seed, residual_sd=args.residual_sd,
                    difficulty_sd=args.difficulty_sd)
    truth = planted.truth()
    path = write_replay(planted, variants, cases, workdir / f"planted-{args.plant_seed}.jsonl")
    acc = sorted(truth.accuracy.values())
    print(f"planted {len(variants)} x {len(cases)} (seed {args.plant_seed}) in {time.perf_counter() - t0:.1f} s: "
          f"accuracy {acc[0]:.1%}..{acc[-1]:.1%} (median {statistics.median(acc):.1%}), true spread "
          f"{truth.spread * 100:.1f} points; best {truth.best}, worst {truth.worst}; replay file {path}")

    if args.verify or args.verify_only:
        bad, wall, rows = verify(planted, path, workdir)
        print(f"exhaustive replay run: {rows} rows in {wall:.1f} s ({rows / wall:.0f} rows/s); "
              f"{len(bad)} verdicts differ from the plant")
        for b in bad[:20]:
            print(f"  {b[0]} {b[1]}: planted {b[2]}, got {b[3]!r}")
        if args.verify_only:
            return 1 if bad else 0

    if args.simulate and args.offline:
        ap.error("--simulate and --offline exclude each other")
    if not (args.simulate or args.offline):
        missing = adaptive_api_ready()
        if missing:
            print(f"the adaptive API is not there yet (pg.run lacks: {missing}); use --simulate, "
                  "or wait for it", file=sys.stderr)
            return 2

    fractions = list(args.fractions)
    all_rows: list[RunMetrics] = []
    for fraction in fractions:
        budget = round(fraction * planted.product)
        for goal in args.goals:
            for seed in range(args.seeds):
                start = time.perf_counter()
                if args.simulate:
                    result = SimulatedSampler.of(planted, variants, seed).run(goal, budget)
                elif args.offline:
                    result = run_offline(planted, variants, goal, budget, seed, study_model(path))
                else:
                    result = run_real(path, goal, budget, seed, workdir, keep=args.keep)
                wall = time.perf_counter() - start
                m = measure(result, truth, goal=goal, fraction=fraction, seed=seed, wall_s=wall)
                all_rows.append(m)
                print(f"  {goal:>12} {fraction:>5.0%} seed {seed:>2}: spent {m.spent:>5}, best "
                      f"{'ok' if m.best_ok else f'-{m.best_gap:.1f}'}, worst "
                      f"{'ok' if m.worst_ok else f'+{m.worst_gap:.1f}'}, spread err {m.spread_error:.1f}, "
                      f"W1 {m.w1:.2f}, {wall:.1f} s", file=sys.stderr, flush=True)
    summary = {(g, f): summarize([r for r in all_rows if r.goal == g and r.fraction == f])
               for g in args.goals for f in fractions}
    kind = ("simulated sampler (not promptgrid's planner)" if args.simulate else
            "promptgrid's planner and estimates on the planted outcomes, no runner (--offline)" if args.offline else
            "pg.run through replay")
    print(f"\n## adaptive evaluation on a planted matrix: {kind}, {args.seeds} seeds, "
          f"product {planted.product}, true spread {truth.spread * 100:.1f} points")
    floors = {f: oracle_floor(planted, round(f * planted.product), max(args.seeds, 20)) for f in fractions}
    known = ({f: known_difficulty_w1(planted, variants, round(f * planted.product), args.seeds, study_model(path))
              for f in fractions} if "distribution" in args.goals else {})
    print(tables(summary, args.goals, fractions, planted.product, floors, known))
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    if args.json:
        args.json.write_text(json.dumps({
            "kind": kind, "plant_seed": args.plant_seed, "product": planted.product,
            "truth": {"accuracy": truth.accuracy, "best": truth.best, "worst": truth.worst, "spread": truth.spread},
            "summary": [{"goal": g, "fraction": f, **s} for (g, f), s in summary.items()],
            "w1_floor": {str(f): v for f, v in floors.items()},
            "w1_known_difficulty": {str(f): v for f, v in known.items()},
            "runs": [r.__dict__ for r in all_rows],
        }, indent=1, default=float) + "\n")
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
