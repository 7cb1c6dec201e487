"""The cost cap (``max_cost``, ``--max-cost``): whether a run may send one more call. One rule for every runner.

A run directory's spend is what its store recorded before this invocation
plus what this invocation's answers cost. ``allows`` refuses a new call once
that spend reaches the cap, or once it plus the calls in flight and this one,
each at the mean cost of this invocation's answers so far (before the first
answer: the list price of the call's input, a lower bound; 0 when the price is
unknown), would pass it. Recorded spend may therefore pass the cap by at most
the calls in flight when it is reached; those are let finish (they are paid
for). ``reached`` says whether the recorded spend has reached the cap (checked
after every answer).

The single-turn runner (``runner.Runner``: a call is a job's prompt) and the
conversation runner (``promptgrid.matrix.running.conversation_runner``: a call is one
step of an episode) each keep one ``Budget`` (the counts the rule reads) and
stop with the reason ``MAX_COST`` when it says so.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["MAX_COST", "Budget", "allows", "reached"]

MAX_COST = "max_cost"
"""The reason a run stopped by its cost cap gives (``RunSummary.stopped``, ``ConversationRunSummary.stopped``)."""


def reached(limit: float | None, spent: float) -> bool:
    """Whether ``spent`` (USD recorded for the run directory) has reached ``limit`` (``None``: no cap)."""
    return limit is not None and spent >= limit


def allows(limit: float | None, *, spent_before: float, spent_now: float, answered: int, in_flight: int,
           first_price: Callable[[], float | None]) -> bool:
    """Whether one more call may be sent under ``limit`` (``None``: always).

    ``spent_before``: USD the store recorded before this invocation; ``spent_now``: what this invocation's
    answers cost; ``answered``: how many answers it got (their mean is the projected cost of a call);
    ``in_flight``: calls sent and not yet answered; ``first_price``: the list price of this call's input, asked
    only before the first answer (``None``: unknown, counted 0).
    """
    if limit is None:
        return True
    spent = spent_before + spent_now
    per_call = spent_now / answered if answered > 0 else (first_price() or 0.0)
    return not (spent >= limit or spent + (in_flight + 1) * per_call > limit)



class Budget:
    """One invocation's spend against the run directory's cap (``limit``; ``None``: no cap), as its runner sends.

    ``before``: USD the store recorded before this invocation; ``now``: what its answers cost so far;
    ``answered``: how many answers that is (an error is not one); ``in_flight``: calls past the check and not
    yet counted (the runner raises and lowers it around each send).
    """

    __slots__ = ("limit", "before", "now", "answered", "in_flight")

    def __init__(self, limit: float | None, before: float = 0.0) -> None:
        self.limit, self.before = limit, before
        self.now = 0.0
        self.answered = 0
        self.in_flight = 0

    def reached(self) -> bool:
        """Whether the recorded spend (before this invocation and since) has reached the cap."""
        return reached(self.limit, self.before + self.now)

    def allows(self, first_price: Callable[[], float | None]) -> bool:
        """Whether one more call may be sent (``allows``; ``first_price``: its list price, asked only before the
        first answer)."""
        return allows(self.limit, spent_before=self.before, spent_now=self.now, answered=self.answered,
                      in_flight=self.in_flight, first_price=first_price)

    def paid(self, cost: float | None, *, answer: bool = True) -> bool:
        """Count one result (an ``answer``, or a final error) and its cost; whether the cap is reached now."""
        self.answered += answer
        if cost:
            self.now += cost
        return self.reached()
