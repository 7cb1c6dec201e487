"""benchmarks/adaptive.py: the planted matrix and its replay answers score as planted (tiny size, no network)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import promptgrid as pg
from support.scripts import load_script


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("benchmarks/adaptive.py", "adaptive_benchmark")


@pytest.fixture(scope="module")
def tiny() -> tuple[list[Any], list[Any]]:
    """Six variants (every return format, tag on and off, markdown, experimental) x nine cases (simple,
    multiple, parallel, and the one whose parameter is a list of dicts)."""
    pytest.importorskip("bfcl_eval")
    try:
        cases = pg.load_dataset("bfcl:format_sensitivity")
    except pg.PromptgridError as exc:
        pytest.skip(f"bfcl:format_sensitivity not usable here: {exc}")
    variants = list(pg.load_grid("bfcl_v4").variants)
    picked = [variants[i] for i in (0, 8, 12, 21, 24, 25)]
    chosen = cases[:4]
    for prefix in ("multiple", "parallel"):
        chosen += [c for c in cases if c.id.startswith(prefix)][:2]
    chosen += [c for c in cases if c.id == "simple_python_96"]
    return picked, chosen


def test_plant_is_seeded_and_spans_the_range(bench: ModuleType, tiny: tuple[list[Any], list[Any]]) -> None:
    variants, cases = tiny
    a = bench.plant(variants, cases, seed=3)
    b = bench.plant(variants, cases, seed=3)
    assert a.correct.shape == (len(variants), len(cases))
    assert (a.correct == b.correct).all() and (a.ability == b.ability).all()
    assert a.correct.any() and not a.correct.all()
    # expected accuracies of the weakest and the strongest variant are the range's ends
    expected = bench._sigmoid(a.ability[:, None] - a.difficulty[None, :]).mean(axis=1)
    assert expected.min() == pytest.approx(bench.ACCURACY_RANGE[0], abs=1e-6)
    assert expected.max() == pytest.approx(bench.ACCURACY_RANGE[1], abs=1e-6)
    truth = a.truth()
    assert truth.spread == pytest.approx(max(truth.accuracy.values()) - min(truth.accuracy.values()))


def test_replay_answers_score_as_planted(bench: ModuleType, tiny: tuple[list[Any], list[Any]],
                                         tmp_path: Path) -> None:
    variants, cases = tiny
    planted = bench.plant(variants, cases, seed=0)
    # every cell both ways: the correct answer is valid, the wrong-name one is not
    for correct in (True, False):
        every = dataclasses.replace(planted, correct=np.full_like(planted.correct, correct))
        assert bench.score_mismatches(every, variants, cases) == []
    wrong = bench.answer_text(variants[0], cases[0], False)
    assert pg.score(wrong, variants[0], cases[0]).bfcl_error_type == "simple_function_checker:wrong_func_name"

    # and through a replay run, as the study runs them
    path = bench.write_replay(planted, variants, cases, tmp_path / "planted.jsonl")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(lines) == len(variants) * len(cases)
    run = pg.run("bfcl_v4", "bfcl:format_sensitivity", models=[bench.replay_model(path)], run_dir=tmp_path / "run",
                 variants=[v.id for v in variants], cases=[c.id for c in cases], progress=False)
    got = {(r.variant_id, r.case_id): r.valid for r in run.results()}
    want = {(v, c): bool(planted.correct[i, j]) for i, v in enumerate(planted.variant_ids)
            for j, c in enumerate(planted.case_ids)}
    assert got == want


def test_metrics_of_a_perfect_and_a_wrong_estimate(bench: ModuleType) -> None:
    acc = {"a": 0.90, "b": 0.885, "c": 0.60, "d": 0.30}
    truth = bench.Truth.of(acc)
    E, V, P = bench.SimEstimate, bench.SimVariantEstimate, bench.SimPick

    def result(best: str, worst: str, values: dict[str, float], p50: float) -> Any:
        return bench.SimResult(P(best, E(values[best], 0, 1)), P(worst, E(values[worst], 0, 1)),
                               E(values[best] - values[worst], 0, 1),
                               [V(k, E(x, 0, 1), 5) for k, x in values.items()], {"p50": E(p50, 0, 1)}, 40, 800)

    perfect = bench.measure(result("a", "d", acc, 0.7425), truth, goal="g", fraction=0.1, seed=0, wall_s=0.0)
    assert perfect.best_ok and perfect.worst_ok and perfect.best_gap == 0 and perfect.worst_gap == 0
    assert perfect.spread_error == pytest.approx(0) and perfect.w1 == pytest.approx(0)
    assert perfect.quantile_error == pytest.approx(0)

    shifted = {k: x + 0.05 for k, x in acc.items()}
    off = bench.measure(result("b", "c", shifted, 0.7425), truth, goal="g", fraction=0.1, seed=1, wall_s=0.0)
    assert off.best_ok and off.best_gap == pytest.approx(1.5)  # within 2 points of the true best
    assert not off.worst_ok and off.worst_gap == pytest.approx(30)
    assert off.spread_error == pytest.approx(60 - 28.5)  # true 60 points, estimated 93.5 - 65
    assert off.w1 == pytest.approx(5)
    summary = bench.summarize([perfect, off])
    assert summary["best_ok_pct"] == 100 and summary["worst_ok_pct"] == 50 and summary["both_ok_pct"] == 50
    assert not math.isnan(summary["w1_median"])


def test_known_difficulty_reference(bench: ModuleType, tiny: tuple[list[Any], list[Any]]) -> None:
    variants, cases = tiny
    planted = bench.plant(variants, cases, seed=1)
    product = planted.correct.size
    cells = bench.distribution_cells(planted, 20, 0, "replay/x.jsonl")
    assert len(cells) == 20 and len(set(cells)) == 20
    assert sorted({c[0] for c in cells}) == list(range(len(variants)))  # balanced: every variant has cells
    # every cell run: the estimate is the realized matrix itself, whatever the fit
    assert bench.known_difficulty_w1(planted, variants, product, 2, "replay/x.jsonl") == pytest.approx(0, abs=1e-9)
    # the difficulties are used: handed ones far from the truth, the same cells give another distance
    part = bench.known_difficulty_w1(planted, variants, product // 3, 3, "replay/x.jsonl")
    flipped = dataclasses.replace(planted, difficulty=-planted.difficulty * 3)
    assert part > 0
    assert bench.known_difficulty_w1(flipped, variants, product // 3, 3, "replay/x.jsonl") != pytest.approx(part)
