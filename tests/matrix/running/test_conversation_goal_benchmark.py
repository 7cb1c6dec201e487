"""benchmarks/conversation_goal.py: the planted conversation matrix, its model, its metrics (tiny size, offline)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from support.scripts import load_script

pytest.importorskip("bfcl_eval.eval_checker.multi_turn_eval.func_source_code.travel_booking")  # mini-mt's classes


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script("benchmarks/conversation_goal.py", "conversation_goal_benchmark")


@pytest.fixture(scope="module")
def small(bench: ModuleType) -> tuple[list[Any], list[Any]]:
    variants, conversations = bench.load("mini-mt:en")
    return variants, conversations[:4]


def test_plant_is_seeded_and_spans_the_range(bench: ModuleType, small: tuple[list[Any], list[Any]]) -> None:
    variants, conversations = small
    a, b = bench.plant(variants, conversations, 3, seed=7), bench.plant(variants, conversations, 3, seed=7)
    assert a.correct.shape == (len(variants), len(conversations), 3) and (a.correct == b.correct).all()
    assert not (a.correct == bench.plant(variants, conversations, 3, seed=8).correct).all()
    expected = bench._sigmoid(a.ability[:, None] - a.difficulty[None, :]).mean(axis=1)
    assert expected.min() == pytest.approx(bench.ACCURACY_RANGE[0], abs=1e-6)
    assert expected.max() == pytest.approx(bench.ACCURACY_RANGE[1], abs=1e-6)
    assert set(a.accuracy) == {v.id for v in variants}
    assert a.accuracy[variants[0].id] == pytest.approx(a.correct[0].mean())


def test_the_planted_model_gives_the_planted_verdicts(bench: ModuleType, small: tuple[list[Any], list[Any]],
                                                      tmp_path: Path) -> None:
    variants, conversations = small
    planted = bench.plant(variants, conversations, 2, seed=1)
    assert planted.correct.any() and not planted.correct.all()
    bad, episodes, _wall = bench.verify(planted, variants, conversations, tmp_path)
    assert episodes == planted.product and bad == []


def test_a_run_finds_what_the_planner_finds_offline(bench: ModuleType, small: tuple[list[Any], list[Any]],
                                                   tmp_path: Path) -> None:
    variants, conversations = small
    planted = bench.plant(variants, conversations, 2, seed=2)
    budget = planted.product // 3
    run = bench.run(planted, variants, conversations, tmp_path / "run", goal="best-worst", budget=budget, seed=2)
    found = run.adaptive(trace=False)[bench.MODEL]
    reference = bench.offline(planted, variants, "best-worst", budget, 2)
    m = bench.measure(found, planted.accuracy, reference, goal="best-worst", seed=2, wall_s=0.0)
    assert m.offline_same and m.spent == budget
    # a reference that names another best is told apart
    other = next(v for v in reference.variants if v.variant_id != reference.best.variant_id)
    moved = dataclasses.replace(reference, best=other)
    assert not bench.measure(found, planted.accuracy, moved, goal="best-worst", seed=2, wall_s=0.0).offline_same


def test_metrics_of_a_right_and_a_wrong_pick(bench: ModuleType, small: tuple[list[Any], list[Any]]) -> None:
    variants, conversations = small
    planted = bench.plant(variants, conversations, 2, seed=4)
    truth = planted.accuracy
    result = bench.offline(planted, variants, "best-worst", planted.product, 0)  # every cell: the truth itself
    m = bench.measure(result, truth, result, goal="best-worst", seed=0, wall_s=0.0)
    assert m.best_ok and m.worst_ok and m.best_gap == 0 and m.worst_gap == 0
    assert m.spread_error == pytest.approx(0) and m.w1 == pytest.approx(0)
    ranked = sorted(truth, key=truth.__getitem__)
    far = [v for v in result.variants if truth[v.variant_id] - truth[ranked[0]] > bench.TOLERANCE + 1e-9]
    assert far  # the planted range is 35%..90%
    wrong = dataclasses.replace(result, worst=far[0])  # the worst reported more than 3 points above the true one
    w = bench.measure(wrong, truth, result, goal="best-worst", seed=0, wall_s=0.0)
    assert not w.worst_ok and w.best_ok and not w.offline_same
    assert w.worst_gap == pytest.approx((truth[far[0].variant_id] - truth[ranked[0]]) * 100)
    s = bench.summarize([m, m])
    assert s["both_ok_pct"] == 100 and s["offline_same_pct"] == 100 and not math.isnan(s["w1_median"])


def test_the_script_prints_the_figure(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--seeds", "2", "--limit", "3", "--repeats", "2", "--dataset", "mini-mt:en"]) == 0
    out = capsys.readouterr().out
    assert "| best-worst | 2 |" in out and "target (issue 32): best-worst at a third" in out
