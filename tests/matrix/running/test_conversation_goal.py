"""Adaptive goals on conversations: the single-turn planner chooses which (variant, conversation, repeat) episodes
run, round by round, from the verdicts of the rounds before; the run says what the goal found; a stopped run
resumes to the same plan.

The model is ``Planted``: right or wrong per episode as a seeded draw with a per-variant chance says (right:
``fake/ground-truth``'s answers; wrong: every turn ended without a call), so which episodes are valid is known
without running them. A handful of mini-mt conversations keep the file fast.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import promptgrid as pg
from promptgrid.errors import RunError
from promptgrid.matrix.api import Run as ConversationRun
from promptgrid.matrix.cli import main
from promptgrid.matrix.clients._base import Completion
from promptgrid.matrix.conversations import (
    Conversation,
    EpisodeContext,
    ScriptedClient,
    conversation_store,
    load_conversations,
)
from promptgrid.matrix.running.findings import AdaptiveResult
from promptgrid.matrix.running.planning import AdaptivePlanner, make_planner
from promptgrid.providers import ErrorKind, call_error
from promptgrid.variants import Variant
from support.episodes import run_conversations

pytest.importorskip("bfcl_eval.eval_checker.multi_turn_eval.func_source_code.travel_booking")  # mini-mt's classes

MODEL = "fake/planted"
VARIANTS = [Variant(), Variant(return_format="json"), Variant(call_mode="native"), Variant(call_mode="constrained")]
CHANCE = {VARIANTS[0].id: 1.0, VARIANTS[1].id: 0.6, VARIANTS[2].id: 0.3, VARIANTS[3].id: 0.0}
"""Per variant, the chance that an episode is right: the first is the best variant, the last the worst."""
REPEATS = 2


class Planted:
    """Right in an episode with its variant's chance (``CHANCE``; a draw seeded by the episode), wrong otherwise;
    an episode of a variant in ``failing`` ends in a (fatal, not halting) error. Records the episodes asked."""

    takes_episode = True

    def __init__(self, *, cost: float | None = None, failing: frozenset[str] = frozenset()) -> None:
        self.inner = ScriptedClient("fake/ground-truth")
        self.name, self.cost, self.failing = MODEL, cost, failing
        self.asked: set[tuple[str, str, int]] = set()

    @staticmethod
    def right(variant_id: str, conversation_id: str, repeat: int) -> bool:
        return random.Random(f"{variant_id}|{conversation_id}|{repeat}").random() < CHANCE[variant_id]

    async def complete(self, messages: Any, params: Mapping[str, Any], *, request: Mapping[str, Any] | None = None,
                       episode: EpisodeContext | None = None) -> Completion:
        assert episode is not None
        v, c, r = episode.variant.id, episode.conversation.id, episode.repeat
        self.asked.add((v, c, r))
        if v in self.failing:
            raise call_error(ErrorKind.BAD_REQUEST, "this request is refused")
        if self.right(v, c, r):
            answer = await self.inner.complete(messages, params, request=request, episode=episode)
        else:
            answer = await self.inner.complete(messages, params, request=request,
                                               episode=dataclasses.replace(episode, step=1))  # ends the turn
        return answer if self.cost is None else dataclasses.replace(answer, cost_usd=self.cost)

    def price(self, input_tokens: int, output_tokens: int) -> float | None:
        return None

    async def aclose(self) -> None:
        pass


@pytest.fixture(scope="module")
def mini() -> list[Conversation]:
    return load_conversations("mini-mt:en", limit=6)


def goal_run(run_dir: Path, conversations: list[Conversation], client: Planted | None = None,
             **options: Any) -> Any:
    kwargs: dict[str, Any] = dict(goal="best-worst", budget=16, rounds=4, seed=3, repeats=REPEATS)
    kwargs.update(options)
    return run_conversations(VARIANTS, conversations, models=[MODEL], run_dir=run_dir,
                             clients={MODEL: client or Planted()}, **kwargs)


def stored_cells(run_dir: Path, conversations: list[Conversation]) -> dict[tuple[int, int, int], bool | None]:
    """The stored episodes as the planner's cells, with their verdicts."""
    v_index = {v.id: i for i, v in enumerate(VARIANTS)}
    c_index = {c.id: i for i, c in enumerate(conversations)}
    return {(v_index[e.variant_id], c_index[e.conversation_id], e.repeat): e.valid
            for e in ConversationRun(run_dir).episodes()}


def planned_cells(conversations: list[Conversation], outcomes: Mapping[tuple[int, int, int], bool | None], *,
                  goal: str = "best-worst", budget: int = 16, rounds: int = 4, seed: int = 3
                  ) -> tuple[list[list[tuple[int, int, int]]], AdaptivePlanner]:
    """The rounds the planner chooses, told ``outcomes`` after each (no runner)."""
    planner = make_planner(MODEL, len(VARIANTS), len(conversations), REPEATS, goal=goal, budget=budget,
                           rounds=rounds, seed=seed)
    assert isinstance(planner, AdaptivePlanner)
    chosen = []
    while cells := planner.next():
        chosen.append(list(cells))
        planner.observe({cell: outcomes[cell] for cell in cells})
    return chosen, planner


# --------------------------------------------------------------------------- the planner drives the run

@pytest.mark.parametrize("goal", ["best-worst", "distribution"])
def test_the_planner_chooses_the_episodes_round_by_round_whatever_the_concurrency(
        tmp_path: Path, mini: list[Conversation], goal: str) -> None:
    client = Planted()
    summary = goal_run(tmp_path / "one", mini, client, goal=goal, concurrency=1)
    product = len(VARIANTS) * len(mini) * REPEATS
    assert (summary.goal, summary.episodes, summary.finished, summary.errors) == (goal, 16, 16, 0)
    assert summary.planned == {}
    outcomes = stored_cells(tmp_path / "one", mini)
    assert len(outcomes) == 16 < product
    rounds, planner = planned_cells(mini, outcomes, goal=goal)
    assert planner.rounds_done == 4 and len(rounds) == 4
    assert set(outcomes) == {cell for cells in rounds for cell in cells}  # exactly the planner's cells
    # the client was asked about those episodes only, and each verdict is the planted one
    assert client.asked == {(VARIANTS[v].id, mini[c].id, r) for v, c, r in outcomes}
    assert all(ok is Planted.right(VARIANTS[v].id, mini[c].id, r) for (v, c, r), ok in outcomes.items())

    wide = goal_run(tmp_path / "eight", mini, goal=goal, concurrency=8)
    assert wide.episodes == 16 and stored_cells(tmp_path / "eight", mini) == outcomes


def test_best_worst_spends_its_rounds_on_the_extremes_and_says_what_it_found(
        tmp_path: Path, mini: list[Conversation]) -> None:
    goal_run(tmp_path, mini, budget=24, rounds=6)
    found = ConversationRun(tmp_path).adaptive()
    assert list(found) == [MODEL]
    result = found[MODEL]
    assert isinstance(result, AdaptiveResult)
    assert (result.goal, result.budget, result.spent, result.product, result.rounds_done, result.seed) == \
        ("best-worst", 24, 24, len(VARIANTS) * len(mini) * REPEATS, 6, 3)
    assert result.best is not None and result.worst is not None
    assert (result.best.variant_id, result.worst.variant_id) == (VARIANTS[0].id, VARIANTS[-1].id)
    assert result.best.accuracy.value == 1.0 and result.worst.accuracy.value == 0.0
    assert result.spread is not None and result.spread.value == 1.0 and result.trace
    # the rounds went to the arms Thompson sampling chose: the extremes got more episodes than the middle
    n = {v.variant_id: v.accuracy.n for v in result.variants}
    assert n[VARIANTS[0].id] + n[VARIANTS[-1].id] > n[VARIANTS[1].id] + n[VARIANTS[2].id]


def test_distribution_estimates_every_variant(tmp_path: Path, mini: list[Conversation]) -> None:
    goal_run(tmp_path, mini, goal="distribution", budget=20)
    result = ConversationRun(tmp_path).adaptive(trace=False)[MODEL]
    assert result.goal == "distribution" and result.spent == 20 and result.trace == []
    assert [v.variant_id for v in result.variants] == [v.id for v in VARIANTS]
    assert all(v.accuracy.kind == "estimated" and 0 <= v.accuracy.value <= 1 for v in result.variants)
    assert set(result.quantiles) == {"p5", "p25", "p50", "p75", "p95"}
    assert result.best is not None and result.best.variant_id == VARIANTS[0].id


def test_a_product_run_after_an_adaptive_one_reports_no_goal(tmp_path: Path, mini: list[Conversation]) -> None:
    goal_run(tmp_path, mini[:2])
    assert ConversationRun(tmp_path).adaptive()
    summary = run_conversations(VARIANTS, mini[:2], models=[MODEL], run_dir=tmp_path, repeats=REPEATS,
                                clients={MODEL: Planted()})
    assert summary.goal is None and summary.episodes == len(VARIANTS) * 2 * REPEATS
    assert summary.skipped == 16 and summary.planned == {}  # the adaptive run's episodes are reused
    assert ConversationRun(tmp_path).adaptive() == {}


# --------------------------------------------------------------------------- outcomes

def test_an_episode_that_ends_in_an_error_is_a_failed_outcome_as_a_single_turn_error_is(
        tmp_path: Path, mini: list[Conversation]) -> None:
    failing = VARIANTS[1].id
    summary = goal_run(tmp_path, mini, Planted(failing=frozenset({failing})), budget=24, rounds=6)
    assert summary.planned == {} and summary.episodes == 24  # the plan went on
    outcomes = stored_cells(tmp_path, mini)
    errored_cells = [cell for cell in outcomes if cell[0] == 1]
    assert len(outcomes) == 24 and summary.errors == len(errored_cells) > 0
    assert all(outcomes[cell] is False for cell in errored_cells)  # docs/adaptive.md: an error is a wrong answer
    rounds, _planner = planned_cells(mini, outcomes, budget=24, rounds=6)
    assert set(outcomes) == {cell for cells in rounds for cell in cells}
    result = ConversationRun(tmp_path).adaptive()[MODEL]
    assert result.spent == 24
    (errored,) = [v for v in result.variants if v.variant_id == failing]
    assert errored.accuracy.n == len(errored_cells) and errored.accuracy.value == 0.0


# --------------------------------------------------------------------------- stopping and resuming

class Killed(Exception):
    pass


def test_a_run_killed_mid_plan_resumes_to_the_same_episodes_without_sending_twice(
        tmp_path: Path, mini: list[Conversation]) -> None:
    fresh = goal_run(tmp_path / "fresh", mini, budget=24, rounds=6)
    want = stored_cells(tmp_path / "fresh", mini)

    def kill(sent: int) -> None:
        if sent == fresh.steps_sent // 2:
            raise Killed

    with pytest.raises(Killed):
        goal_run(tmp_path / "run", mini, budget=24, rounds=6, on_sent=kill, concurrency=3)
    partial = stored_cells(tmp_path / "run", mini)
    assert 0 < len(partial) < 24 and set(partial) < set(want)
    with conversation_store(tmp_path / "run") as store:
        kept = store.step_count()  # the steps committed before the kill (those of other episodes included)

    resumed = goal_run(tmp_path / "run", mini, budget=24, rounds=6, concurrency=3)
    assert stored_cells(tmp_path / "run", mini) == want
    assert resumed.skipped == len(partial) and resumed.steps_sent + kept == fresh.steps_sent
    again = goal_run(tmp_path / "run", mini, budget=24, rounds=6)
    assert (again.steps_sent, again.skipped, again.episodes) == (0, 24, 24)
    assert ConversationRun(tmp_path / "run").adaptive()[MODEL] == ConversationRun(tmp_path / "fresh").adaptive()[MODEL]


def test_the_cost_cap_stops_the_plan_in_a_round_and_a_rerun_goes_on(tmp_path: Path,
                                                                   mini: list[Conversation]) -> None:
    fresh = goal_run(tmp_path / "fresh", mini, budget=24, rounds=6)
    capped = goal_run(tmp_path / "run", mini, Planted(cost=0.01), budget=24, rounds=6, concurrency=2,
                      max_cost=0.01 * (fresh.steps_sent // 2))
    assert capped.stopped == "max_cost"
    assert "stopped after" in capped.planned[MODEL] and "the run was stopped" in capped.planned[MODEL]
    stopped = ConversationRun(tmp_path / "run").adaptive()[MODEL]
    assert not stopped.complete and stopped.spent < 24
    resumed = goal_run(tmp_path / "run", mini, Planted(cost=0.01), budget=24, rounds=6, max_cost=100.0)
    assert resumed.stopped is None and resumed.planned == {} and resumed.unfinished == 0
    assert stored_cells(tmp_path / "run", mini) == stored_cells(tmp_path / "fresh", mini)
    assert ConversationRun(tmp_path / "run").adaptive()[MODEL].complete


# --------------------------------------------------------------------------- options, CLI, pg.run

@pytest.mark.parametrize(("options", "says"), [
    ({"goal": "best-worst"}, "give --budget N too"),
    ({"budget": 10}, "give --goal"),
    ({"rounds": 3}, "applies to an adaptive run"),
    ({"goal": "best_worst", "budget": 10}, "Did you mean 'best-worst'"),
    ({"goal": "best-worst", "budget": 0}, "a budget of at least 1"),
    ({"goal": "best-worst", "budget": 10, "seed": "x"}, "seed must be a whole number"),
    ({"goal": "best-worst", "budget": 10, "batch": True}, "no batch API for"),
])
def test_goal_options_that_do_not_go_together_are_refused_before_anything_is_written(
        tmp_path: Path, mini: list[Conversation], options: dict[str, Any], says: str) -> None:
    client = Planted()
    with pytest.raises(RunError, match=says.replace("(", r"\(").replace(")", r"\)")):
        run_conversations(VARIANTS, mini[:1], models=[MODEL], run_dir=tmp_path / "r", clients={MODEL: client},
                          **options)
    assert client.asked == set() and not (tmp_path / "r").exists()


def test_the_cli_runs_a_goal_and_prints_what_it_found(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    args = ["run", "call_modes", "--dataset", "mini-mt:en", "--model", "fake/noisy:1", "--limit", "4",
            "--goal", "best-worst", "--budget", "12", "--rounds", "3", "--run-dir", str(run_dir), "--no-progress"]
    assert main([*args, "--dry-run"]) == 0
    assert "adaptive plan (goal best-worst): at most 12 of the product's 36 episodes per model" in \
        capsys.readouterr().out
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "12 episodes: 12 finished" in out
    assert "adaptive study:" in out and "goal best-worst, seed 0: 12 of 36 jobs spent (33% of the product)" in out
    assert "3/3 rounds" in out and ("best:" in out or "all variants tie" in out)


def test_pg_run_passes_the_goal_and_its_seed(tmp_path: Path) -> None:
    run = pg.run("call_modes", "mini-mt:en", models=["fake/noisy:1"], run_dir=tmp_path, limit=3,
                 goal="distribution", budget=9, rounds=3, params={"seed": 5})
    assert isinstance(run, pg.ConversationRun) and run.summary.goal == "distribution"
    assert len(run.episodes()) == 9
    result = run.adaptive()["fake/noisy:1"]
    assert (result.goal, result.spent, result.rounds_done, result.seed) == ("distribution", 9, 3, 5)
