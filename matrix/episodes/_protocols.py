"""The two protocols of an episode: ``Episode`` plays a case under a variant, ``Scorer`` judges what it played.

An episode asks its runner for each model answer through ``send``, the runner's one path for a step: the
store's answer under the step's key, a step of another episode in flight, or a new call (paced, within the
model's limit, retried, under the cost cap; running/sending.py). The episode knows nothing of that; the runner
knows nothing of turns, environments or what a step's messages mean. A step the runner cannot answer
(``NotAnswered``: its call failed for good, its model cannot be sent it, or the run stopped before it was sent)
ends the episode there, counted as ``NotAnswered`` says (as a single-turn job in the same case); a model that
was stopped raises the runner's own exception through ``play``, which the runner handles.

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


class NotAnswered(Exception):  # noqa: N818 - an outcome of a step, not a bug: the episode ends there
    """The runner could not answer a step: ``message`` says why (with the turn and step). Exactly one of the
    three reasons holds, and each ends the episode as a single-turn job ends in the same case:

    - ``stopped`` names the run's stop (``"max_cost"``, ``"interrupted"``): the step was not sent; the episode is
      left unfinished (pending) and the next run resumes it;
    - ``unsupported`` says why the model cannot be sent the step's request pieces (native tools on a model
      without tool support): nothing was sent; the episode is ``unsupported``, out of every rate, and checked
      again by each run (the model may support it then);
    - else the call failed for good (``error_kind``: the ``ErrorKind`` value, an error retries could not fix):
      the episode is an ``error``, counted as failed, and sent again only with ``retry_errors``.
    """

    def __init__(self, message: str, stopped: str | None = None, *, error_kind: str | None = None,
                 unsupported: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.stopped = stopped
        self.error_kind = error_kind
        self.unsupported = unsupported


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
