"""Planners (what a run sends next) and adaptive runs: budgets, rounds, determinism, resume, batch and export rounds."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from promptgrid.errors import RunError
from promptgrid.matrix.api import Run
from promptgrid.matrix.running.exchange import export_requests, import_results
from promptgrid.matrix.running.findings import replay
from promptgrid.matrix.running.plan import JobMaker, iter_jobs
from promptgrid.matrix.running.planning import (
    BestWorstPlanner,
    DistributionPlanner,
    ProductPlanner,
    UniformPlanner,
    make_planner,
    round_sizes,
)
from promptgrid.matrix.running.session import BatchMode, execute
from promptgrid.matrix.running.store import RunStore
from promptgrid.templates import Renderer
from support.batches import MemoryBatchAPI
from support.builders import bfcl_variants, numbered_cases
from support.fake_server import answer_batch_file
from support.running import StandInVerdict, answering_server, config, prepared

MODEL = "openai/fake-model"
N_VARIANTS, N_CASES = 6, 40
# Planted accuracy per variant index: variant 0 is the best, variant 5 the worst, by far.
PLANTED = [0.95, 0.7, 0.6, 0.55, 0.5, 0.05]


def planted_score(response: str, variant: Any, case: Any) -> StandInVerdict:
    """Correct on the first PLANTED[v] share of the cases (by number): fixed per (variant, case)."""
    v = [x.id for x in bfcl_variants(N_VARIANTS)].index(variant.id)
    c = int(case.id.split("_")[-1])
    return StandInVerdict(c < PLANTED[v] * N_CASES)


def _prep(run_dir: Path, api_base: str, *, goal: str | None = "best-worst", budget: int = 80, rounds: int = 4,
          seed: int = 0, concurrency: int = 8) -> Any:
    cfg = dataclasses.replace(config(run_dir, api_base=api_base, concurrency=concurrency), goal=goal, budget=budget,
                              rounds=rounds, plan_seed=seed)
    return prepared(cfg, bfcl_variants(N_VARIANTS), numbered_cases(N_CASES))


def _cells(run_dir: Path) -> set[tuple[str, str, int]]:
    with RunStore(run_dir, readonly=True) as store:
        return {(r.variant_id, r.case_id, r.repeat) for r in store.rows()}


def _findings(run_dir: Path) -> dict[str, Any]:
    return {m: r.to_dict() for m, r in Run(run_dir).adaptive().items()}


# --------------------------------------------------------------------------- planners


def test_the_product_planner_makes_the_jobs_iter_jobs_makes_in_the_same_order() -> None:
    variants, cases = bfcl_variants(3), numbered_cases(5)
    expected = list(iter_jobs("m", {"seed": 3}, variants, cases, 2, Renderer()))
    planner, make, got = ProductPlanner(3, 5, 2, chunk=7), JobMaker("m", {"seed": 3}, variants, cases, Renderer()), []
    while (cells := planner.next()) is not None:
        got += make(cells)
    assert [j.key for j in got] == [j.key for j in expected]
    assert [(j.variant_id, j.case.id, j.repeat, j.params) for j in got] == \
        [(j.variant_id, j.case.id, j.repeat, j.params) for j in expected]


def test_round_sizes_split_the_budget_evenly() -> None:
    assert round_sizes(10, 3) == [4, 3, 3]
    assert round_sizes(2, 5) == [1, 1]
    assert round_sizes(0, 3) == []


def _drive(planner: Any, truth: Any) -> Counter[int]:
    """Run a planner to its end against ``truth(v, c, r)``; returns the cells spent per variant."""
    per_variant: Counter[int] = Counter()
    seen = set()
    while (cells := planner.next()) is not None:
        if not cells:
            continue
        for cell in cells:
            assert cell not in seen  # a cell is planned once
            seen.add(cell)
            per_variant[cell[0]] += 1
        planner.observe({cell: truth(*cell) for cell in cells})
    assert len(seen) == planner.total
    return per_variant


def test_best_worst_spends_most_on_the_best_and_the_worst_variant() -> None:
    acc = [0.9, 0.6, 0.55, 0.5, 0.45, 0.1]
    planner = BestWorstPlanner("m", 6, 100, 1, budget=240, rounds=12, seed=1)
    spent = _drive(planner, lambda v, c, r: c < acc[v] * 100)
    middle = max(spent[v] for v in range(1, 5))
    assert spent[0] > middle and spent[5] > middle, spent


def test_distribution_sampling_is_balanced_over_variants_and_cases() -> None:
    planner = DistributionPlanner("m", 7, 30, 2, budget=100, rounds=3, seed=4)
    cells: list[Any] = []
    while (got := planner.next()) is not None:
        cells += got
        planner.observe(dict.fromkeys(got, True))
    per_variant = Counter(v for v, _c, _r in cells)
    per_unit = Counter((c, r) for _v, c, r in cells)
    assert max(per_variant.values()) - min(per_variant.values()) <= 1
    assert max(per_unit.values()) <= 1 + 100 // 60


def test_uniform_draws_distinct_cells_and_the_seed_decides_them() -> None:
    def cells(seed: int) -> list[Any]:
        p = UniformPlanner("m", 5, 20, 1, budget=30, rounds=2, seed=seed)
        out: list[Any] = []
        while (got := p.next()) is not None:
            out += got
            p.observe(dict.fromkeys(got, False))
        return out

    assert len(set(cells(1))) == 30
    assert cells(1) == cells(1) and cells(1) != cells(2)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"goal": "best_worst", "budget": 5}, "Did you mean 'best-worst'"),
    ({"goal": "uniform"}, "--budget"),
    ({"goal": "uniform", "budget": 0}, "--budget"),
    ({"goal": "uniform", "budget": 5, "rounds": 0}, "--rounds"),
])
def test_bad_adaptive_options_are_refused_naming_the_option(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(RunError, match=message):
        make_planner("m", 3, 3, 1, **kwargs)


def test_a_budget_over_the_product_plans_the_product() -> None:
    planner = make_planner("m", 2, 3, 1, goal="uniform", budget=1000, rounds=4)
    assert planner.total == 6


# --------------------------------------------------------------------------- adaptive runs


def test_an_adaptive_run_sends_its_budget_and_finds_the_planted_best_and_worst(tmp_path: Path) -> None:
    with answering_server() as srv:
        summary = asyncio.run(execute(_prep(tmp_path, srv.url), scorer=planted_score))
        sent = len(srv.requests())
    assert summary.jobs == 80 and sent == 80 and len(_cells(tmp_path)) == 80
    run = Run(tmp_path)
    assert run.pending() == 0 and run.counts()["jobs"] == 80
    found = run.adaptive()[MODEL]
    ids = [v.id for v in bfcl_variants(N_VARIANTS)]
    assert found.best is not None and found.worst is not None and found.spread is not None
    assert (found.best.variant_id, found.worst.variant_id) == (ids[0], ids[5])
    assert found.best.accuracy.kind == "measured" and found.spread.low <= found.spread.value <= found.spread.high
    assert (found.spent, found.product, found.rounds_done, found.complete) == (80, 240, 4, True)
    assert [p.calls for p in found.trace] == [20, 40, 60, 80]
    json.dumps(found.to_dict())  # machine-readable as it is


def test_an_exhaustive_run_has_no_adaptive_findings(tmp_path: Path) -> None:
    with answering_server() as srv:
        asyncio.run(execute(_prep(tmp_path, srv.url, goal=None), scorer=planted_score))
    assert Run(tmp_path).adaptive() == {} and len(_cells(tmp_path)) == N_VARIANTS * N_CASES


@pytest.mark.parametrize("goal", ["best-worst", "distribution", "uniform"])
def test_the_same_seed_makes_the_same_decisions_whatever_the_concurrency(tmp_path: Path, goal: str) -> None:
    with answering_server() as srv:
        for name, conc, seed in (("a", 1, 5), ("b", 8, 5), ("c", 8, 6)):
            asyncio.run(execute(_prep(tmp_path / name, srv.url, goal=goal, seed=seed, concurrency=conc),
                                scorer=planted_score))
    assert _cells(tmp_path / "a") == _cells(tmp_path / "b") != _cells(tmp_path / "c")
    assert _findings(tmp_path / "a") == _findings(tmp_path / "b")


class _StopAfter:
    """A scorer that interrupts the run after ``n`` answers (a killed process, as the runner sees it)."""

    def __init__(self, n: int) -> None:
        self.n, self.runner = n, None

    def started(self, runner: Any) -> None:
        self.runner = runner

    def __call__(self, response: str, variant: Any, case: Any) -> StandInVerdict:
        self.n -= 1
        if self.n == 0 and self.runner is not None:
            self.runner.stop("interrupted")
        return planted_score(response, variant, case)


@pytest.mark.parametrize("goal", ["best-worst", "distribution"])
def test_a_killed_adaptive_run_resumes_to_the_same_decisions_and_estimates(tmp_path: Path, goal: str) -> None:
    with answering_server() as srv:
        asyncio.run(execute(_prep(tmp_path / "whole", srv.url, goal=goal), scorer=planted_score))
        whole = len(srv.requests())
        stopper = _StopAfter(33)
        first = asyncio.run(execute(_prep(tmp_path / "killed", srv.url, goal=goal), scorer=stopper,
                                    started=stopper.started))
        assert first.stopped == "interrupted"
        asyncio.run(execute(_prep(tmp_path / "killed", srv.url, goal=goal), scorer=planted_score))
        resumed = len(srv.requests()) - whole
        keys = Counter(srv.sent_hashes()[whole:])
    assert _cells(tmp_path / "killed") == _cells(tmp_path / "whole")
    assert _findings(tmp_path / "killed") == _findings(tmp_path / "whole")
    assert resumed <= 80 + 8  # at most the calls in flight when it was killed are sent again
    assert len(keys) == 80


def test_batch_rounds_are_one_batch_each_and_decide_as_online(tmp_path: Path) -> None:
    api = MemoryBatchAPI()
    prep = _prep(tmp_path / "batch", "http://127.0.0.1:9/v1", goal="uniform", budget=60, rounds=3)
    summary = asyncio.run(execute(prep, scorer=planted_score, batch=BatchMode(wait=True, poll_s=0.001),
                                  backends={MODEL: api.backend()}))
    assert summary.batches == 3 and summary.planned == {}
    with answering_server() as srv:
        asyncio.run(execute(_prep(tmp_path / "online", srv.url, goal="uniform", budget=60, rounds=3),
                            scorer=planted_score))
    assert _cells(tmp_path / "batch") == _cells(tmp_path / "online")
    assert _findings(tmp_path / "batch") == _findings(tmp_path / "online")


def test_a_batch_round_not_waited_for_stops_the_plan_with_a_note(tmp_path: Path) -> None:
    api = MemoryBatchAPI(polls=50)
    prep = _prep(tmp_path, "http://127.0.0.1:9/v1", goal="uniform", budget=60, rounds=3)
    summary = asyncio.run(execute(prep, scorer=planted_score, batch=BatchMode(wait=False, poll_s=0.001),
                                  backends={MODEL: api.backend()}))
    assert summary.batches == 1 and "--no-wait" in summary.planned[MODEL]


def test_export_batch_writes_one_round_at_a_time_and_the_next_after_import(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    written: list[set[str]] = []
    for i in range(4):
        requests, results = tmp_path / f"requests{i}.jsonl", tmp_path / f"results{i}.jsonl"
        summary = export_requests(_prep(run_dir, "http://127.0.0.1:9/v1", goal="best-worst", budget=60, rounds=3),
                                  requests, new_run=i == 0, scorer=planted_score)
        written.append({json.loads(line)["custom_id"] for line in requests.read_bytes().splitlines()})
        if i == 3:
            break
        assert summary.lines == 20 and "import-batch" in (summary.planned or "")
        results.write_bytes(answer_batch_file(requests.read_bytes(), None))
        import_results(run_dir, results, scorer=planted_score)
    assert not written[3] and len(set().union(*written)) == 60  # 3 rounds of 20 new calls, then nothing
    with answering_server() as srv:
        asyncio.run(execute(_prep(tmp_path / "online", srv.url, goal="best-worst", budget=60, rounds=3),
                            scorer=planted_score))
    assert _cells(run_dir) == _cells(tmp_path / "online")


# --------------------------------------------------------------------------- estimates


def test_the_distribution_model_orders_variants_it_barely_saw() -> None:
    """Planted: accuracy falls with the variant index; at 20% of the cells the fit keeps that order roughly."""
    import numpy as np

    variants = [(v.id, v.label, v.dimensions()) for v in bfcl_variants(8)]
    rng = np.random.default_rng(0)
    ability = np.linspace(2.5, -1.5, 8)
    difficulty = rng.normal(0, 1.5, 100)
    truth = rng.random((8, 100)) < 1 / (1 + np.exp(-(ability[:, None] - difficulty[None, :])))
    outcomes = {(v, c, 0): bool(truth[v, c]) for v in range(8) for c in range(100)}
    found = replay("m", "distribution", variants, 100, 1, outcomes, budget=160, rounds=4, seed=0, trace=False)
    est = [v.accuracy.value for v in found.variants]
    assert all(v.accuracy.kind == "estimated" for v in found.variants)
    assert np.corrcoef(est, truth.mean(axis=1))[0, 1] > 0.9
    assert abs(found.spread.value - (truth.mean(axis=1).max() - truth.mean(axis=1).min())) < 0.15
    assert set(found.quantiles) == {"p5", "p25", "p50", "p75", "p95"}
    assert all(q.low <= q.value <= q.high for q in found.quantiles.values())


def test_the_dry_run_of_an_adaptive_plan_scales_the_product_to_the_budget(tmp_path: Path) -> None:
    from promptgrid.matrix.running.estimate import estimate

    whole = estimate(_prep(tmp_path, "http://127.0.0.1:9/v1", goal=None)).models[0]
    part = estimate(_prep(tmp_path, "http://127.0.0.1:9/v1", budget=60)).models[0]
    assert (whole.jobs, whole.product, part.jobs, part.product) == (240, None, 60, 240)
    assert part.calls == 60 and abs(part.input_tokens - whole.input_tokens / 4) <= 1


def test_the_command_line_runs_an_adaptive_study_and_prints_what_it_found(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from promptgrid.matrix.cli import main

    argv = ["run", "bfcl_v4", "--dataset", "mini:en", "--model", "fake/auto", "--goal", "uniform", "--budget", "30",
            "--rounds", "3", "--seed", "2", "--run-dir", str(tmp_path / "r"), "--no-progress"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "adaptive study:" in out and "goal uniform, seed 2: 30 of 1,196 jobs spent" in out
    # fake/auto fails every one of these cells: a tie, named as one, and the spread in pp
    assert "all variants tie at 0.0%" in out and "spread: 0.0 pp" in out and "best:" not in out
    assert main(["report", str(tmp_path / "r"), "--format", "json", "--out", str(tmp_path / "rep")]) == 0
    data = json.loads((tmp_path / "rep" / "report.json").read_text())
    (found,) = data["adaptive"]
    assert (found["goal"], found["spent"], found["seed"], found["complete"]) == ("uniform", 30, 2, True)
    assert set(found["quantiles"]) == {"p5", "p25", "p50", "p75", "p95"}


def test_each_model_gets_its_budget_with_repeats_and_languages(tmp_path: Path) -> None:
    from promptgrid.matrix.running.config import ModelSpec, model_params
    from support.builders import language_twins

    with answering_server() as srv:
        specs = [ModelSpec(name=name, params=model_params({"temperature": 0.5}, 2), api_base=srv.url, concurrency=4)
                 for name in ("openai/model-a", "openai/model-b")]
        cfg = dataclasses.replace(config(tmp_path, models=specs, repeats=2), goal="distribution", budget=25, rounds=5)
        prep = prepared(cfg, language_twins() + bfcl_variants(2), numbered_cases(10))
        summary = asyncio.run(execute(prep, scorer=planted_score_any))
    assert summary.jobs == 50
    with RunStore(tmp_path, readonly=True) as store:
        per_model = Counter(r.model for r in store.rows())
        repeats = {r.repeat for r in store.rows()}
    assert per_model == {"openai/model-a": 25, "openai/model-b": 25} and repeats == {0, 1}
    found = Run(tmp_path).adaptive()
    assert set(found) == {"openai/model-a", "openai/model-b"}
    assert all(r.spent == 25 and r.product == 4 * 10 * 2 and len(r.variants) == 4 for r in found.values())


def planted_score_any(response: str, variant: Any, case: Any) -> StandInVerdict:
    return StandInVerdict(int(case.id.split("_")[-1]) % 3 != 0)


def test_run_adaptive_computes_once_per_state_of_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from promptgrid.matrix.running import findings

    with answering_server() as srv:
        asyncio.run(execute(_prep(tmp_path, srv.url, goal="distribution", budget=40), scorer=planted_score))
        calls: list[bool] = []
        real = findings.run_findings

        def counted(record: Any, store: Any, *, trace: bool = True) -> Any:
            calls.append(trace)
            return real(record, store, trace=trace)

        monkeypatch.setattr(findings, "run_findings", counted)
        first = Run(tmp_path).adaptive()
        again, other, untraced = Run(tmp_path).adaptive(), Run(tmp_path).adaptive(), Run(tmp_path).adaptive(trace=False)
        assert calls == [True]  # one computation: later calls, other Run objects, trace=False reuse it
        assert again[MODEL].to_dict() == first[MODEL].to_dict() == other[MODEL].to_dict()
        assert untraced[MODEL].trace == [] and untraced[MODEL].best == first[MODEL].best
        again[MODEL].variants.clear()  # what a caller gets is its own copy
        assert Run(tmp_path).adaptive()[MODEL].variants and calls == [True]
        asyncio.run(execute(_prep(tmp_path, srv.url, goal="distribution", budget=60), scorer=planted_score))
    assert Run(tmp_path).adaptive()[MODEL].spent == 60 and calls == [True, True]  # the store changed: again


def test_best_worst_fits_only_the_point_it_chooses_by_and_uniform_fits_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from promptgrid.matrix.running import findings

    variants = [(v.id, v.label, v.dimensions()) for v in bfcl_variants(N_VARIANTS)]
    outcomes = {(v, c, 0): c < PLANTED[v] * N_CASES for v in range(N_VARIANTS) for c in range(N_CASES)}
    fits: list[tuple[int, bool, bool]] = []
    real = findings._fitted

    def spy(*args: Any, start: Any = None, point_only: bool = False) -> Any:
        fits.append((args[4], point_only, start is not None))
        return real(*args, start=start, point_only=point_only)

    monkeypatch.setattr(findings, "_fitted", spy)
    found = replay("m", "best-worst", variants, N_CASES, 1, outcomes, budget=80, rounds=4, seed=0)
    assert len(found.trace) == 4 and len(fits) == 4 and all(point for _d, point, _s in fits)
    assert [warm for _d, _p, warm in fits] == [False, True, True, False]  # the trace's fits start from the last
    fits.clear()
    replay("m", "uniform", variants, N_CASES, 1, outcomes, budget=80, rounds=4, seed=0)
    assert fits == []
    found = replay("m", "distribution", variants, N_CASES, 1, outcomes, budget=80, rounds=4, seed=0)
    untraced = replay("m", "distribution", variants, N_CASES, 1, outcomes, budget=80, rounds=4, seed=0, trace=False)
    assert found.variants == untraced.variants and found.spread == untraced.spread  # the same with or without


def test_one_blas_thread_limits_blas_to_one_thread_and_restores_it() -> None:
    import numpy  # noqa: F401  (loads numpy's BLAS, which threadpoolctl then finds)
    from threadpoolctl import threadpool_info

    from promptgrid.matrix.running.findings import one_blas_thread

    def blas() -> list[int]:
        return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]

    before = blas()
    with one_blas_thread():
        assert all(n == 1 for n in blas())
    assert blas() == before
