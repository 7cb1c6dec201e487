"""What a run sends next: planners, asked by the runner for cells and told what each one scored.

The runner (``runner.Runner``) asks its model's planner for the next cells
(``Planner.next``) and tells it the outcome of every cell (``Planner.observe``);
how the cells are sent -- online, in provider batches, into an export file --
is the transport's business (``runner.Transport``), not the planner's. A cell
is ``(variant index, case index, repeat)`` into the run's variant and case
lists; the runner turns it into a ``plan.Job`` (rendered prompt and key).

- ``ProductPlanner``: the whole product, case outer, variant inner, repeat
  innermost, in chunks, never waiting for results: every run before adaptive
  studies, row for row.
- Adaptive planners (``--goal``, ``--budget N`` cells per model, ``--rounds R``):
  the budget is planned in rounds; a round is decided from the outcomes of
  the rounds before it only, and the runner reports a round's outcomes once
  every cell of it has a result (``next`` returns ``[]`` until then). The
  decisions therefore depend on the seed and the stored outcomes alone, not
  on concurrency, timing or the order answers arrive: a killed run, resumed,
  replays its rounds from the store (their cells are cached) and decides the
  same next round. With ``--batch`` each round is one batch per model.

  ``best-worst`` (FormatSpread, Sclar et al. 2024): each variant is an arm
  with a Beta(1 + correct, 1 + wrong) posterior; half of each round's cells
  go to the arm of the largest Thompson draw (looking for the best variant),
  half to the smallest (the worst). Every variant walks the same seeded order
  of (case, repeat) cells, so the arms are compared on the same cases first.

  ``distribution`` (PromptEval, Polo et al. 2024): balanced sampling -- every
  variant gets its next cell in turn, and variant v's k-th cell is the
  ``(offset_v + k)``-th of one seeded order of (case, repeat) cells, with
  offsets spread evenly, so cases are covered evenly too; the estimates come
  from a logistic model fitted afterwards (``findings``).

  ``uniform``: cells drawn uniformly at random without replacement (the
  baseline both are measured against; its estimates are per-variant means).

An error counts as a wrong answer, as in every accuracy promptgrid reports;
an unsupported or unscored cell has no outcome (``None``) and is spent.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Mapping, Sequence
from itertools import islice, product
from typing import TYPE_CHECKING, Any

from promptgrid.errors import RunError, closest

from .config import GOALS

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

__all__ = ["CHUNK", "DEFAULT_ROUNDS", "GOALS", "AdaptivePlanner", "BestWorstPlanner", "Cell", "DistributionPlanner",
           "Planner", "ProductPlanner", "UniformPlanner", "make_planner", "round_sizes"]

Cell = tuple[int, int, int]
"""(index into the run's variants, index into its cases, repeat)."""

CHUNK = 256
"""Cells the product planner hands out at a time (the runner looks them up in the store together)."""

DEFAULT_ROUNDS = 20
"""Rounds an adaptive budget is planned in when ``--rounds`` is not given (with ``--batch``, give fewer: each
round is a batch, and a batch can take up to a day)."""


class Planner:
    """What to send next. ``total``: the cells it plans at most (the progress bar's and ``pending``'s total)."""

    total: int = 0
    adaptive: bool = False

    def next(self) -> Sequence[Cell] | None:
        """The next cells to send; ``[]``: none until the cells handed out so far are observed; ``None``: done."""
        raise NotImplementedError

    def observe(self, outcomes: Mapping[Cell, bool | None]) -> None:
        """The outcomes of cells handed out: True correct, False wrong (or a call that failed), None no outcome."""


class ProductPlanner(Planner):
    """Every (case, variant, repeat) cell, case outer: the plan of an exhaustive run (``plan.iter_jobs``' order)."""

    def __init__(self, variants: int, cases: int, repeats: int, *, chunk: int = CHUNK) -> None:
        self.total = variants * cases * repeats
        self._cells: Iterator[Cell] = ((v, c, r) for c, v, r in product(range(cases), range(variants),
                                                                            range(repeats)))
        self._chunk = chunk

    def next(self) -> Sequence[Cell] | None:
        cells = list(islice(self._cells, self._chunk))
        return cells or None


def round_sizes(total: int, rounds: int) -> list[int]:
    """``total`` cells split into ``rounds`` rounds as evenly as possible (the larger ones first); no empty round."""
    rounds = max(1, min(rounds, total))
    base, extra = divmod(total, rounds)
    return [base + (i < extra) for i in range(rounds)] if total else []


def _rng(seed: int, *parts: str) -> np.random.Generator:
    """A generator that depends only on the seed and the names (model, goal): adding a model changes no other."""
    import numpy as np

    digest = hashlib.sha256("\x1f".join((str(seed), *parts)).encode("utf-8")).digest()
    return np.random.default_rng([int.from_bytes(digest[i:i + 4], "little") for i in range(0, 32, 4)])


class AdaptivePlanner(Planner):
    """A budget planned in rounds, each decided from the outcomes of the rounds before it."""

    adaptive = True
    goal = ""

    def __init__(self, model: str, variants: int, cases: int, repeats: int, *, budget: int, rounds: int,
                 seed: int) -> None:
        self.model, self.variants, self.cases, self.repeats = model, variants, cases, repeats
        self.units = cases * repeats
        """(case, repeat) cells per variant: variant v's cell u is case ``u // repeats``, repeat ``u % repeats``."""
        self.product = variants * self.units
        self.total = min(budget, self.product)
        self.sizes = round_sizes(self.total, rounds)
        self.rng = _rng(seed, model, self.goal)
        self.outcomes: dict[Cell, bool | None] = {}
        self.issued: list[Cell] = []
        self.spent_after: list[int] = []
        """Cells spent at the end of each round observed so far (the x axis of the estimates' trace)."""
        self._round = 0
        self._waiting = False

    @property
    def rounds_done(self) -> int:
        return len(self.spent_after)

    def cell(self, variant: int, unit: int) -> Cell:
        return (variant, unit // self.repeats, unit % self.repeats)

    def next(self) -> Sequence[Cell] | None:
        if self._waiting:
            return []
        if self._round >= len(self.sizes):
            return None
        cells = self.choose(self.sizes[self._round])
        if not cells:
            return None
        self._round += 1
        self._waiting = True
        self.issued.extend(cells)
        return cells

    def observe(self, outcomes: Mapping[Cell, bool | None]) -> None:
        self.outcomes.update(outcomes)
        self.learn(outcomes)
        self._waiting = False
        self.spent_after.append(len(self.issued))

    def choose(self, n: int) -> list[Cell]:
        raise NotImplementedError

    def learn(self, outcomes: Mapping[Cell, bool | None]) -> None:
        """Update the planner's state from a round's outcomes (default: nothing beyond ``self.outcomes``)."""


class BestWorstPlanner(AdaptivePlanner):
    """Thompson sampling over variants, half of each round for the best arm and half for the worst."""

    goal = "best-worst"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.order = self.rng.permutation(self.units)
        """The (case, repeat) units in the order every variant walks them."""
        self.taken = [0] * self.variants
        self.correct = [0] * self.variants
        self.wrong = [0] * self.variants

    def choose(self, n: int) -> list[Cell]:
        import numpy as np

        open_ = np.array([t < self.units for t in self.taken])
        if not open_.any():
            return []
        alpha = 1.0 + np.asarray(self.correct, dtype=float)
        beta = 1.0 + np.asarray(self.wrong, dtype=float)
        draws = self.rng.beta(alpha, beta, size=(n, self.variants))  # one posterior draw per slot and arm
        out: list[Cell] = []
        for slot in range(n):
            if not open_.any():
                break
            row = draws[slot]
            top, bottom = int(np.argmax(row)), int(np.argmin(row))
            # Even slots look for the best arm, odd ones for the worst. Every arm takes part in the draw, also one
            # whose cells are all run: when such an arm wins, that search has its answer measured in full and
            # the slot goes to the other search (else to the open arm of the largest draw).
            first, second = (top, bottom) if slot % 2 == 0 else (bottom, top)
            v = first if open_[first] else second if open_[second] else int(np.nanargmax(np.where(open_, row,
                                                                                                  np.nan)))
            out.append(self.cell(v, int(self.order[self.taken[v]])))
            self.taken[v] += 1
            if self.taken[v] >= self.units:
                open_[v] = False
        return out

    def learn(self, outcomes: Mapping[Cell, bool | None]) -> None:
        for (v, _c, _r), ok in outcomes.items():
            if ok is True:
                self.correct[v] += 1
            elif ok is False:
                self.wrong[v] += 1


class DistributionPlanner(AdaptivePlanner):
    """Balanced sampling: variants in turn, each walking one seeded order of cells from its own offset."""

    goal = "distribution"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.order = self.rng.permutation(self.units)
        self.turn = self.rng.permutation(self.variants)
        """The order variants take their turns in (a seeded tie-break)."""
        self.offset = [(i * self.units) // max(1, self.variants) for i in range(self.variants)]
        self.taken = [0] * self.variants
        self._next = 0

    def choose(self, n: int) -> list[Cell]:
        out: list[Cell] = []
        tries = 0
        while len(out) < n and tries < self.variants:
            v = int(self.turn[self._next % self.variants])
            self._next += 1
            if self.taken[v] >= self.units:
                tries += 1
                continue
            tries = 0
            unit = int(self.order[(self.offset[v] + self.taken[v]) % self.units])
            out.append(self.cell(v, unit))
            self.taken[v] += 1
        return out


class UniformPlanner(AdaptivePlanner):
    """Cells drawn uniformly at random without replacement (the baseline)."""

    goal = "uniform"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.drawn = self.rng.choice(self.product, size=self.total, replace=False)
        self._at = 0

    def choose(self, n: int) -> list[Cell]:
        picked = self.drawn[self._at:self._at + n]
        self._at += len(picked)
        return [self.cell(int(i) // self.units, int(i) % self.units) for i in picked]


_PLANNERS: dict[str, type[AdaptivePlanner]] = {p.goal: p for p in (BestWorstPlanner, DistributionPlanner,
                                                                     UniformPlanner)}


def make_planner(model: str, variants: int, cases: int, repeats: int, *, goal: str | None = None,
                 budget: int | None = None, rounds: int | None = None, seed: int = 0) -> Planner:
    """The planner of one model: the product without a goal, else the goal's adaptive planner."""
    if goal is None:
        return ProductPlanner(variants, cases, repeats)
    if goal not in _PLANNERS:
        raise RunError(f"goal {goal!r} is not one of {', '.join(GOALS)} (--goal).{closest(goal, GOALS)}")
    if budget is None or isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise RunError(f"goal {goal} needs a budget of at least 1 job per model (--budget N), got {budget!r}.")
    n_rounds = DEFAULT_ROUNDS if rounds is None else rounds
    if isinstance(n_rounds, bool) or not isinstance(n_rounds, int) or n_rounds < 1:
        raise RunError(f"rounds must be a whole number of at least 1 (--rounds), got {rounds!r}.")
    return _PLANNERS[goal](model, variants, cases, repeats, budget=budget, rounds=n_rounds, seed=seed)


def spent_fraction(planner: Planner) -> float:
    """The share of the product a planner plans (1.0 for the product itself)."""
    if isinstance(planner, AdaptivePlanner):
        return planner.total / planner.product if planner.product else math.nan
    return 1.0
