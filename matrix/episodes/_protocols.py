"""The two protocols of an episode: ``Episode`` plays a case under a variant, ``Scorer`` judges what it played.

An episode asks its runner for each model answer through ``send``, the runner's one path for a step: the
store's answer under the step's key, a step of another episode in flight, or a new call (paced, within the
model's limit, retried, under the cost cap; running/sending.py). The episode knows nothing of that; the runner
knows nothing of turns, environments or what a step's messages mean. A step the runner cannot answer
(``NotAnswered``: its call failed for good, or the run stopped before it was sent) ends the episode unfinished;
a model that was stopped raises the runner's own exception through ``play``, which the runner handles.

``conversation_play`` holds the conversation's episode and scorer (the state and response check).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from promptgrid.records import Step

__all__ = ["Episode", "NotAnswered", "Scorer", "Send", "StepRequest"]


@dataclass(frozen=True)
class StepRequest:
    """One step an episode asks its runner to answer."""

    messages: Sequence[Mapping[str, Any]]
    """The messages sent (the transcript so far)."""
    request: Mapping[str, Any] | None
    """The request pieces beside them (native tools, a constraint), ``None`` in prompt mode."""
    digest: str
    """The step's identity as the episode keys it (``conversation_play.StepKeys``): the runner's store key is
    ``job_key`` over the model, its parameters, this digest and the repeat."""
    context: Any
    """Where the episode stands (``_steps.EpisodeContext``: case, variant, turn, step, request, repeat): what a
    scripted model answers by, and what a progress line names."""
    park: Callable[[], Awaitable[None]] | None = None
    """Frees what the episode holds while the step waits long (its environment's worker, during a provider batch
    round); ``None`` when it holds nothing."""


class NotAnswered(Exception):  # noqa: N818 - an outcome of a step, not a bug: the episode ends unfinished
    """The runner could not answer a step: ``message`` says why (with the turn and step), ``stopped`` names the
    run's stop (``"max_cost"``) when the step was not sent because the run stopped, else ``None`` (the call
    failed for good)."""

    def __init__(self, message: str, stopped: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.stopped = stopped


Send = Callable[[StepRequest], Awaitable[tuple[Step, bool]]]
"""The runner's step path for one episode: the step's answer, and whether it was sent now (``False``: read back
from the store, or shared with another episode's step in flight)."""


class Episode(Protocol):
    """How one kind of case is played: ``play`` takes ``case`` under ``variant`` through its steps, each answered
    by ``send``, against ``env`` (the case's environment, where it has one), and returns the trajectory its
    ``Scorer`` judges."""

    async def play(self, case: Any, variant: Any, send: Send, env: Any, *, repeat: int = 0) -> Any: ...


class Scorer(Protocol):
    """How a trajectory is judged against its case: a ``Verdict`` (a conversation's has its turn verdicts)."""

    def score(self, trajectory: Any, case: Any) -> Any: ...
