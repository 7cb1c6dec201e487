"""``sending.send``: the one send path of both runners, on its own (the runners' tests cover it in a run)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from promptgrid.matrix.clients import Completion
from promptgrid.matrix.running import sending
from promptgrid.matrix.running.ratelimit import TokenBucket
from promptgrid.matrix.running.sending import Line, Sent, Stopped, send
from promptgrid.providers import CallError, ErrorKind, RetryPolicy, call_error

POLICY = RetryPolicy(max_attempts=4, base=0.0, cap=0.0, retry_after_cap=5.0)


def _answers(*outcomes: Completion | CallError) -> tuple[Callable[[], Awaitable[Any]], list[int]]:
    """A call whose attempts give ``outcomes`` in turn (the last one again after them); and the attempts made."""
    made: list[int] = []

    async def complete() -> Any:
        made.append(1)
        outcome = outcomes[min(len(made), len(outcomes)) - 1]
        if isinstance(outcome, CallError):
            raise outcome
        return outcome

    return complete, made


def _send(line: Line, complete: Callable[[], Awaitable[Any]], *, stopping: Callable[[], bool] = lambda: False,
          est_tokens: int = 100, waits: list[float] | None = None) -> Sent:
    async def wait(_error: CallError, delay: float) -> None:
        if waits is not None:
            waits.append(delay)

    return asyncio.run(send(line, complete, timeout=5.0, retry=POLICY, est_tokens=est_tokens, stopping=stopping,
                            redact=lambda text: text.replace("sk-secret", "[REDACTED]"), wait=wait))


def test_an_answer_after_a_retryable_error_and_its_unused_tokens_given_back_once() -> None:
    bucket = TokenBucket(600.0, burst=1000.0)
    line = Line(tpm=bucket)
    complete, made = _answers(call_error(ErrorKind.SERVER, "busy"),
                              Completion("ok", input_tokens=30, output_tokens=10))
    sent = _send(line, complete, est_tokens=100)
    assert (sent.completion.text, sent.error, sent.attempts, len(made)) == ("ok", None, 2, 2)
    # Two attempts took their estimate of 100 each; the answer gives back once what it did not use (100 - 40):
    # 1000 - 200 + 60, not 920 (given back twice).
    assert 859 <= bucket.level <= 862
    assert line.halted is None


def test_an_error_every_later_call_would_repeat_stops_the_model_with_its_redacted_message() -> None:
    line = Line()
    complete, made = _answers(call_error(ErrorKind.AUTH, "key sk-secret refused"))
    sent = _send(line, complete)
    assert sent.error is not None and sent.error.kind is ErrorKind.AUTH and len(made) == 1  # not retried
    assert line.halted == "key [REDACTED] refused"
    with pytest.raises(Stopped) as info:  # the model's next call is not sent
        _send(line, _answers(Completion("never"))[0])
    assert info.value.attempts == 0


def test_a_retry_after_above_the_cap_is_waited_once_at_the_cap_then_stops_the_model() -> None:
    line, waits = Line(), []
    complete, made = _answers(call_error(ErrorKind.RATE_LIMIT, "slow down", retry_after=1000.0))
    sent = _send(line, complete, waits=waits)
    assert sent.error is not None and len(made) == 2 and waits == [5.0]
    assert line.halted is not None and "retry-after cap of 5 s" in line.halted and "gave up after 2" in line.halted


def test_a_call_is_left_pending_when_the_run_stops_while_it_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    stopping = [False]

    async def wait(_error: CallError, _delay: float) -> None:
        stopping[0] = True  # the run is stopped during the backoff

    complete, made = _answers(call_error(ErrorKind.SERVER, "busy"), Completion("late"))
    with pytest.raises(Stopped) as info:
        asyncio.run(send(Line(), complete, timeout=5.0, retry=POLICY, est_tokens=1, stopping=lambda: stopping[0],
                         redact=str, wait=wait))
    assert info.value.attempts == 1 and len(made) == 1


def test_connection_refusals_in_a_row_over_the_grace_stop_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sending, "GRACE_S", 0.0)
    line = Line()
    complete, made = _answers(call_error(ErrorKind.CONNECTION, "no connection to http://127.0.0.1:9/v1"))
    sent = _send(line, complete)
    assert sent.error is not None and len(made) == sending.REFUSALS
    assert line.halted is not None and line.halted.startswith("no connection to its server for")
    # An answer between refusals starts the count again.
    line = Line()
    complete, made = _answers(call_error(ErrorKind.CONNECTION, "refused"), Completion("up"))
    assert _send(line, complete).completion.text == "up" and (line.refusals, line.halted) == (0, None)


def test_a_models_first_call_goes_alone_then_the_waiting_calls_go_together() -> None:
    """Until one call of the model has ended without stopping it, its calls go one at a time (a refused key costs
    one request); the calls that waited then go concurrently, not one by one behind the lock."""
    in_flight: list[int] = [0]
    most: list[int] = []

    async def complete() -> Completion:
        in_flight[0] += 1
        most.append(in_flight[0])
        await asyncio.sleep(0.01)
        in_flight[0] -= 1
        return Completion("ok")

    async def main() -> list[Sent]:
        line = Line()
        return list(await asyncio.gather(*(send(line, complete, timeout=5.0, retry=POLICY, est_tokens=1,
                                                stopping=lambda: False, redact=str) for _ in range(6))))

    sent = asyncio.run(main())
    assert all(s.completion is not None for s in sent)
    assert most[0] == 1 and max(most) >= 3, most  # the first alone, then the five that waited side by side
