"""An adaptive run's report never contradicts itself: every headline (summary, HTML card, console, JSON) leads
with the goal's best, worst and spread, spreads are in pp, intervals hold their point, ties are named."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from promptgrid.matrix.report import build_report
from promptgrid.matrix.report._adaptive import adaptive_console, headline
from promptgrid.matrix.running.findings import AdaptiveResult, estimate_cells, replay
from promptgrid.matrix.running.planning import make_planner
from promptgrid.variants import load_grid
from support.rows import make_row

N_CASES = 120
BUDGET = 312  # 10% of 26 x 120, 12 cells per variant: the measured best and worst are mostly noise


def _planted(seed: int = 0) -> tuple[list[Any], np.ndarray]:
    """26 bfcl_v4 variants x N_CASES cases: additive dimension effects, case difficulties ~ N(0, 1.5^2) logits,
    drawn once (benchmarks/adaptive.py's recipe, smaller)."""
    variants = list(load_grid("bfcl_v4").variants)
    rng = np.random.default_rng(seed)
    ability = np.zeros(len(variants))
    for dim in ("return_format", "tool_call_tag", "doc_format", "prompt_format", "prompt_style"):
        values = sorted({str(getattr(getattr(v, dim), "value", getattr(v, dim))) for v in variants})
        effect = dict(zip(values, rng.normal(0, 0.8, len(values)), strict=True))
        ability += [effect[str(getattr(getattr(v, dim), "value", getattr(v, dim)))] for v in variants]
    difficulty = rng.normal(0, 1.5, N_CASES)
    correct = rng.random((len(variants), N_CASES)) < 1 / (1 + np.exp(-(ability[:, None] + 0.8 - difficulty)))
    return variants, correct


def _adaptive_run(goal: str, seed: int = 0) -> tuple[AdaptiveResult, list[dict[str, Any]]]:
    """The planner and estimates on the planted outcomes (as Run.adaptive replays a store), and the rows of the
    cells the plan chose."""
    variants, correct = _planted(seed)
    described = [(v.id, v.label, v.dimensions()) for v in variants]
    outcomes = {(i, j, 0): bool(correct[i, j]) for i in range(len(variants)) for j in range(N_CASES)}
    found = replay("m", goal, described, N_CASES, 1, outcomes, budget=BUDGET, rounds=6, seed=0, trace=False)
    planner = make_planner("m", len(variants), N_CASES, 1, goal=goal, budget=BUDGET, rounds=6, seed=0)
    while cells := planner.next():
        planner.observe({c: outcomes[c] for c in cells})
    rows = [make_row(variants[v], case_id=f"case_{c:03d}", valid=bool(ok))
            for (v, c, _r), ok in planner.outcomes.items()]
    return found, rows


def _spread_pp(value: float) -> str:
    return f"{100 * value:.1f} pp"


@pytest.mark.parametrize("goal", ["distribution", "best-worst"])
def test_every_headline_agrees_with_the_adaptive_section(tmp_path: Path, goal: str) -> None:
    found, rows = _adaptive_run(goal)
    r = found.to_dict()
    result = build_report(rows, tmp_path, baseline=None, formats={"md", "json", "html"}, adaptive=[r])
    best, worst, spread = r["best"]["label"], r["worst"]["label"], _spread_pp(r["spread"]["value"])
    measured = result.data.sensitivity[0]
    # the planted case this test is for: the measured per-variant numbers name other variants or another spread
    assert (measured.best_label, measured.worst_label, _spread_pp(measured.spread)) != (best, worst, spread)

    md = (tmp_path / "report.md").read_text()
    summary = md.split("## Summary", 1)[1].split("## ", 1)[0]
    first = summary.strip().splitlines()[0]
    assert first.startswith("- **m**: adaptive study (goal " + goal)
    assert f"best variant {best}" in first and f"worst {worst}" in first and f"spread (best - worst) {spread}" in first
    assert ("estimated" if goal == "distribution" else "measured") in first
    assert "noise" not in first  # no noise figure on a number it does not qualify
    section = md.split("## Adaptive study", 1)[1].split("\n## ", 1)[0]
    assert "| best " in section and best in section and worst in section and spread in section

    console = result.console
    assert f"best: {best} " in console and f"worst: {worst} " in console and f"spread: {spread} " in console
    assert "m: measured: " in console and "spread 0" not in console
    assert re.search(r"spread \d+\.\d% ", console) is None  # spreads in pp, never %

    data = json.loads((tmp_path / "report.json").read_text())
    (entry,) = data["adaptive"]
    assert (entry["best"]["label"], entry["worst"]["label"], _spread_pp(entry["spread"]["value"])) == (
        best, worst, spread)
    assert "adaptive" in data["sensitivity"][0]["basis"]

    html = (tmp_path / "report.html").read_text()
    card = html.split('class="cards"', 1)[1].split("</section>", 1)[0]
    assert best.replace(">", "&gt;") in card and worst.replace(">", "&gt;") in card and spread in card
    assert "noise ≈" not in card
    if measured.best_label not in (best, *found.ties.get("best", ())):
        assert measured.best_label.replace(">", "&gt;") not in card.split("Every correct")[0].split("<ul>")[0]


def test_the_common_cells_say_why_they_differ_from_the_estimate() -> None:
    r = {"model": "m", "goal": "distribution", "spent": 10, "product": 40,
         "best": {"variant_id": "a", "label": "a", "accuracy": {"value": 0.9, "low": 0.8, "high": 0.95,
                                                                 "kind": "estimated", "n": 5}},
         "worst": {"variant_id": "c", "label": "c", "accuracy": {"value": 0.2, "low": 0.1, "high": 0.3,
                                                                  "kind": "estimated", "n": 5}},
         "spread": {"value": 0.7, "low": 0.5, "high": 0.8, "kind": "estimated", "n": 10},
         "ties": {"best": ["a"], "worst": ["c"]}, "variants": [], "quantiles": {},
         "common": {"cells": 3, "cases": 3, "noise": 0.05, "ties": {"best": ["b"], "worst": ["c"]},
                    "best": {"variant_id": "b", "label": "b", "accuracy": {"value": 1.0, "low": 0.4, "high": 1.0,
                                                                            "kind": "measured", "n": 3}},
                    "worst": {"variant_id": "c", "label": "c", "accuracy": {"value": 0.0, "low": 0.0, "high": 0.6,
                                                                             "kind": "measured", "n": 3}},
                    "spread": {"value": 1.0, "low": 0.6, "high": 1.0, "kind": "measured", "n": 9}}}
    from promptgrid.matrix.report._adaptive import common_sentence

    text = common_sentence(r)
    assert "Measured on the 3 cells every variant ran" in text and "spread 100.0 pp [60.0, 100.0]" in text
    assert "about 5.0 pp is expected from sampling noise alone" in text
    assert "the headline, which uses every cell, names a best" in text and "c worst" not in text


# --------------------------------------------------------------------------- ties and intervals


def _described(k: int) -> list[tuple[str, str, dict[str, Any]]]:
    return [(v.id, v.label, v.dimensions()) for v in list(load_grid("bfcl_v4").variants)[:k]]


@pytest.mark.parametrize("goal", ["uniform", "best-worst"])
def test_variants_that_all_tie_are_named_as_a_tie_not_one_variant_best_and_worst(goal: str) -> None:
    variants = _described(4)
    outcomes = {(v, c, 0): True for v in range(4) for c in range(5)}
    found = replay("m", goal, variants, 5, 1, outcomes, budget=20, rounds=2, seed=0, trace=False)
    assert found.best is not None and found.worst is not None
    assert found.best.variant_id != found.worst.variant_id and found.all_tied
    assert set(found.ties["best"]) == set(found.ties["worst"]) == {v[0] for v in variants}
    r = found.to_dict()
    console = adaptive_console([r])
    assert "all variants tie at 100.0%" in console and "best:" not in console
    assert "all variants tie at 100.0%" in headline(r) and "spread 0.0 pp" in headline(r)
    assert r["common"]["cells"] == 5 and r["common"]["spread"]["value"] == 0


def test_a_tie_for_best_names_every_tied_variant() -> None:
    variants = _described(4)
    rates = [1.0, 1.0, 0.5, 0.0]  # a and b tie for best
    outcomes = {(v, c, 0): c < rates[v] * 4 for v in range(4) for c in range(4)}
    found = estimate_cells("uniform", variants, 4, 1, outcomes)
    assert found["ties"]["best"] == (variants[0][0], variants[1][0]) and found["ties"]["worst"] == (variants[3][0],)
    r = {"model": "m", "goal": "uniform", "spent": 16, "product": 16, "best": found["best"].to_dict(),
         "worst": found["worst"].to_dict(), "spread": found["spread"].to_dict(), "quantiles": {},
         "ties": {k: list(v) for k, v in found["ties"].items()},
         "variants": [v.to_dict() for v in found["variants"]]}
    assert f"best variant {variants[0][1]}, {variants[1][1]} (tied) at 100.0%" in headline(r)


@pytest.mark.parametrize("goal", ["distribution", "best-worst", "uniform"])
def test_every_interval_holds_its_estimate(goal: str) -> None:
    found, _rows = _adaptive_run(goal, seed=1)
    numbers = [v.accuracy for v in found.variants if v.accuracy.n] + list(found.quantiles.values())
    numbers += [e for e in (found.spread, found.common.spread if found.common else None) if e is not None]
    assert numbers
    for e in numbers:
        assert e.low <= e.value <= e.high, e
    if goal == "distribution":  # the plug-in median used to sit on its own upper bound
        p50 = found.quantiles["p50"]
        assert p50.low < p50.value < p50.high


def test_the_end_of_run_lines_leave_best_worst_and_spread_to_the_adaptive_study(tmp_path: Path) -> None:
    from promptgrid.matrix.report import explain

    _found, rows = _adaptive_run("distribution")
    assert "best - worst variant" in explain(rows, tmp_path)
    text = explain(rows, tmp_path, adaptive=["m"])
    assert "best - worst variant" not in text and "best, worst and spread are the adaptive study's" in text
