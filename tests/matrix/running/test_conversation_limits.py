"""Conversation runs under the single-turn runner's limits: ``rpm``/``tpm`` pacing and the ``max_cost`` cap.

The pacing is measured on a fake clock: the rate limiter's module (``ratelimit``) gets a clock that only moves
when a bucket sleeps, so the times the model sees are exact and the test takes no wall time. The cost cap is
driven by a client that prices every answer at one cent.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import promptgrid as pg
from promptgrid.matrix.cli import main
from promptgrid.matrix.clients._base import Completion
from promptgrid.matrix.conversations import (
    Conversation,
    EpisodeContext,
    ScriptedClient,
    load_conversations,
)
from promptgrid.matrix.running import ratelimit
from promptgrid.matrix.running.ratelimit import TokenBucket, estimate_tokens
from promptgrid.variants import Variant
from support.episodes import run_conversations

pytest.importorskip("bfcl_eval.eval_checker.multi_turn_eval.func_source_code.travel_booking")  # mini-mt's classes

GT = "fake/ground-truth"
PROMPT = Variant()
NATIVE = Variant(call_mode="native")
CENT = 0.01


class FakeClock:
    """Seconds that pass only when the rate limiter sleeps (``ratelimit``'s ``time.monotonic`` and
    ``asyncio.sleep``, nothing else's)."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        # At least one step of the float: a bucket a rounding error short of its need sleeps for less than the
        # clock's resolution, and a clock that did not move would keep it waiting forever.
        self.now = max(self.now + max(0.0, seconds), math.nextafter(self.now, math.inf))
        await asyncio.sleep(0)  # the real one: let the other episodes run


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(ratelimit, "time", SimpleNamespace(monotonic=fake.monotonic))
    monkeypatch.setattr(ratelimit, "asyncio", SimpleNamespace(sleep=fake.sleep, Lock=asyncio.Lock))
    return fake


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> list[tuple[float, float]]:
    """(rate per second of the bucket, amount) of every ``TokenBucket.acquire``: the single-turn runner's buckets."""
    seen: list[tuple[float, float]] = []
    real = TokenBucket.acquire

    async def acquire(self: TokenBucket, amount: float = 1.0) -> None:
        seen.append((self.rate, amount))
        await real(self, amount)

    monkeypatch.setattr(TokenBucket, "acquire", acquire)
    return seen


class Stamping:
    """Answers as ``fake/ground-truth`` and records, per request, the fake time it was sent and its messages;
    every answer is priced at ``cost`` USD (``None``: as the fake, free); with ``usage=False`` its token counts
    are unknown (``None``), as some servers answer."""

    takes_episode = True

    def __init__(self, clock: FakeClock | None = None, cost: float | None = None, usage: bool = True) -> None:
        self.inner = ScriptedClient(GT)
        self.name = GT
        self.clock, self.cost, self.usage = clock, cost, usage
        self.sent: list[tuple[float, list[dict[str, Any]], EpisodeContext]] = []

    async def complete(self, messages: Any, params: Mapping[str, Any], *, request: Mapping[str, Any] | None = None,
                       episode: EpisodeContext | None = None) -> Completion:
        assert episode is not None
        self.sent.append((self.clock.now if self.clock else 0.0, [dict(m) for m in messages], episode))
        completion = await self.inner.complete(messages, params, request=request, episode=episode)
        if not self.usage:
            completion = dataclasses.replace(completion, input_tokens=None, output_tokens=None)
        return completion if self.cost is None else dataclasses.replace(completion, cost_usd=self.cost)

    def price(self, input_tokens: int, output_tokens: int) -> float | None:
        return None  # unknown list price: the cap projects from the answers' cost

    async def aclose(self) -> None:
        pass


@pytest.fixture(scope="module")
def mini() -> list[Conversation]:
    return load_conversations("mini-mt:en", limit=3)


def paced(times: list[float], per_second: float, burst: float) -> bool:
    """Whether the ``i``-th request (0-based) was sent no earlier than a bucket of ``per_second`` with ``burst``
    allows: ``(i + 1 - burst) / per_second`` seconds after the start."""
    return all(t >= (i + 1 - burst) / per_second - 1e-9 for i, t in enumerate(sorted(times)))


# --------------------------------------------------------------------------- rpm / tpm

def test_rpm_paces_every_step_through_the_single_turn_runners_bucket(
        tmp_path: Path, mini: list[Conversation], clock: FakeClock, taken: list[tuple[float, float]]) -> None:
    client = Stamping(clock)
    summary = run_conversations([PROMPT, NATIVE], mini, models=[GT], run_dir=tmp_path, clients={GT: client},
                                concurrency=4, rpm={GT: 60})
    assert summary.valid == summary.episodes == 6 and summary.errors == 0
    times = [t for t, _, _ in client.sent]
    assert len(times) == summary.steps_sent > 6  # several steps per episode, each paced
    # 60 a minute, a burst of one: the n-th request no earlier than n - 1 s, and never more than 61 in 60 s.
    assert paced(times, 1.0, 1.0)
    assert max(sum(1 for u in times if t <= u < t + 60) for t in times) <= 61
    assert sorted(times)[-1] >= len(times) - 1  # the clock moved only by the bucket's waits: it did pace
    assert [rate for rate, _ in taken] == [1.0] * len(times)  # one request per step, from a TokenBucket


def test_tpm_takes_each_steps_estimate_and_paces_the_tokens(
        tmp_path: Path, mini: list[Conversation], clock: FakeClock, taken: list[tuple[float, float]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    client = Stamping(clock, usage=False)  # no usage reported: nothing is given back, every estimate counts
    tpm = 600_000.0  # 10,000 tokens a second, a burst of one second's worth (a step here is about 8,000)
    summary = run_conversations([PROMPT], mini, models=[GT], run_dir=tmp_path, clients={GT: client},
                                concurrency=3, tpm={GT: tpm}, model_params={GT: {"max_tokens": 100}})
    assert summary.valid == 3
    estimates = sorted(estimate_tokens(messages, 100) for _, messages, _ in client.sent)
    assert sorted(amount for _, amount in taken) == estimates  # each step's estimate, taken once
    assert max(estimates) <= tpm / 60  # no step bigger than the bucket (the bound below is then exact)
    # The tokens taken by the time of each request never exceed the burst plus what the rate let through.
    sent = sorted((t, estimate_tokens(messages, 100)) for t, messages, _ in client.sent)
    total = 0.0
    for t, amount in sent:
        total += amount
        assert total <= tpm / 60 + t * tpm / 60 + 1e-6
    assert sent[-1][0] > 0  # the steps' tokens are more than one burst: the run waited

    given: list[float] = []  # with usage reported, the bucket gets back what the estimate took too many
    monkeypatch.setattr(TokenBucket, "give_back", lambda self, amount: given.append(amount))
    counted = Stamping(clock)
    run_conversations([PROMPT], mini[:1], models=[GT], run_dir=tmp_path / "usage", clients={GT: counted},
                      tpm={GT: tpm})
    assert len(given) == len(counted.sent) and all(amount >= 0 for amount in given) and sum(given) > 0


def test_estimate_counts_text_and_tool_call_arguments() -> None:
    messages = [{"role": "user", "content": "x" * 40},
                {"role": "assistant", "content": None,
                 "tool_calls": [{"id": "c", "type": "function", "function": {"name": "cd", "arguments": "y" * 38}}]},
                {"role": "tool", "tool_call_id": "c", "content": "z" * 8}]
    assert estimate_tokens(messages, 7) == (40 + 2 + 38 + 8) // 4 + 7
    assert estimate_tokens([{"role": "user", "content": "abcd"}]) == 1


def test_estimate_counts_the_tool_schemas_a_native_request_sends() -> None:
    """Providers bill a native request's tool schemas as input (they are the function docs a prompt-mode message
    holds): the estimate behind TPM, the cost cap and the dry run counts them; other request pieces are not sent
    as input."""
    tools = [{"type": "function", "function": {"name": "cd", "description": "Change directory — ändern",
                                               "parameters": {"type": "object", "properties": {
                                                   "folder": {"type": "string"}}, "required": ["folder"]}}}]
    schemas = len(json.dumps(tools, ensure_ascii=False, separators=(",", ":")))
    messages = [{"role": "user", "content": "abcd"}]
    assert estimate_tokens(messages, 7, {"call_mode": "native", "tools": tools}) == (4 + schemas) // 4 + 7
    assert estimate_tokens(messages, None, {"call_mode": "constrained", "grammar": "x" * 400}) == 1
    assert estimate_tokens(messages, None, None) == 1


def test_rpm_given_to_pg_run_and_the_cli_paces_a_conversation_run(tmp_path: Path, clock: FakeClock,
                                                                  taken: list[tuple[float, float]],
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    run = pg.run("bfcl_v4", "mini-mt:en", models=[GT], run_dir=tmp_path / "api", limit=2, rpm=120,
                 variants=["python->python,False"])
    assert isinstance(run, pg.ConversationRun) and run.summary.steps_sent > 2
    assert len(taken) == run.summary.steps_sent and {rate for rate, _ in taken} == {2.0}
    assert clock.now >= (run.summary.steps_sent - 2) / 2.0  # 2 a second, a burst of 2
    taken.clear()
    assert main(["run", "bfcl_v4", "--dataset", "mini-mt:en", "--model", GT, "--limit", "1", "--variant",
                 "python->python,False", "--rpm", "30", "--tpm", "600000", "--run-dir", str(tmp_path / "cli")]) == 0
    capsys.readouterr()
    rates = sorted({rate for rate, _ in taken})
    assert rates == [0.5, 10_000.0]  # the request bucket (30 a minute) and the token bucket, for every step
    assert len(taken) == 2 * sum(1 for _ in _steps(tmp_path / "cli"))


def _steps(run_dir: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(run_dir / "conversations.sqlite3") as db:
        return list(db.execute("SELECT key FROM calls"))


def test_a_bad_rate_is_refused_before_anything_is_sent(tmp_path: Path, mini: list[Conversation]) -> None:
    client = Stamping()
    for options in ({"rpm": {GT: 0}}, {"tpm": {GT: -5}}, {"max_cost": 0}, {"max_cost": "lots"}):
        with pytest.raises(pg.RunError, match="must be a positive number"):
            run_conversations([PROMPT], mini, models=[GT], run_dir=tmp_path / "r", clients={GT: client}, **options)
    assert client.sent == [] and not (tmp_path / "r" / "conversations.sqlite3").exists()


# --------------------------------------------------------------------------- max_cost

def test_max_cost_stops_new_steps_stores_the_episode_unfinished_and_a_rerun_resumes_it(
        tmp_path: Path, mini: list[Conversation]) -> None:
    run_dir = tmp_path / "run"
    client = Stamping(cost=CENT)
    capped = run_conversations([PROMPT], mini, models=[GT], run_dir=run_dir, clients={GT: client}, concurrency=1,
                               max_cost=0.035)
    # Projected at a cent a step: the 4th step would pass $0.035, so three are sent, all in the first episode.
    assert capped.stopped == "max_cost" and capped.max_cost == 0.035
    assert capped.steps_sent == 3 and capped.spend == pytest.approx(0.03)
    assert (capped.unfinished, capped.not_run, capped.finished, capped.errors) == (1, 2, 0, 0)
    (stored,) = pg.open_conversation_run(run_dir).episodes()
    assert stored.valid is None and stored.details["stopped"] == "max_cost" and stored.steps == 3
    assert "the run directory's spend reached --max-cost" in (stored.error or "")
    assert len({ctx.conversation.id for _, _, ctx in client.sent}) == 1  # no other episode was started

    resumed_client = Stamping(cost=CENT)
    resumed = run_conversations([PROMPT], mini, models=[GT], run_dir=run_dir, clients={GT: resumed_client},
                                concurrency=1, max_cost=10.0)
    assert resumed.stopped is None and resumed.valid == resumed.finished == 3 and resumed.unfinished == 0
    assert resumed.steps_stored == 3  # the unfinished episode's steps are read back, not sent again
    fresh = run_conversations([PROMPT], mini, models=[GT], run_dir=tmp_path / "fresh", clients={GT: Stamping()})
    assert resumed.steps_sent + 3 == fresh.steps_sent
    run = pg.open_conversation_run(run_dir)
    assert run.spend() == pytest.approx(CENT * fresh.steps_sent)
    assert sorted((e.conversation_id, e.valid, e.turns) for e in run.episodes()) == \
        sorted((e.conversation_id, e.valid, e.turns) for e in fresh.results)


def test_a_cap_already_reached_sends_nothing_and_starts_no_episode(tmp_path: Path, mini: list[Conversation]) -> None:
    run_conversations([PROMPT], mini[:1], models=[GT], run_dir=tmp_path, clients={GT: Stamping(cost=CENT)})
    client = Stamping(cost=CENT)
    summary = run_conversations([PROMPT, NATIVE], mini, models=[GT], run_dir=tmp_path, clients={GT: client},
                                max_cost=0.01)
    assert client.sent == [] and summary.stopped == "max_cost"
    assert (summary.skipped, summary.not_run, summary.steps_sent, summary.unfinished) == (1, 5, 0, 0)
    assert len(pg.open_conversation_run(tmp_path).episodes()) == 1


def test_concurrent_episodes_pass_the_cap_by_at_most_the_steps_in_flight(tmp_path: Path,
                                                                         mini: list[Conversation]) -> None:
    client = Stamping(cost=CENT)
    summary = run_conversations([PROMPT, NATIVE], mini, models=[GT], run_dir=tmp_path, clients={GT: client},
                                concurrency=4, max_cost=0.05)
    assert summary.stopped == "max_cost"
    assert 0.05 - CENT < summary.spend <= 0.05 + 4 * CENT + 1e-9
    assert summary.unfinished + summary.not_run + summary.finished == summary.episodes
    stored = pg.open_conversation_run(tmp_path).episodes()
    assert all(e.valid is not None or e.details.get("stopped") == "max_cost" for e in stored)


def test_the_cli_says_the_cap_stopped_a_conversation_run_and_exits_3(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    base = ["run", "bfcl_v4", "--dataset", "mini-mt:en", "--model", GT, "--variant", "python->python,False",
            "--run-dir", str(run_dir)]
    assert main([*base, "--limit", "1"]) == 0
    capsys.readouterr()
    with sqlite3.connect(run_dir / "conversations.sqlite3") as db:  # pretend the first answers were paid for
        db.execute("UPDATE calls SET cost_usd = 1.0")
    steps = len(_steps(run_dir))
    code = main([*base, "--limit", "2", "--max-cost", "0.5"])
    printed = capsys.readouterr()
    assert code == 3, printed
    assert f"stopped: the run directory's spend reached --max-cost $0.5000 (now ${steps:.4f})" in printed.err
    assert "Raise --max-cost and run the same command to continue." in printed.err
    assert "Traceback" not in printed.err + printed.out and len(_steps(run_dir)) == steps
    assert main([*base, "--limit", "2", "--max-cost", "100", "--no-progress"]) == 0
    assert "0 ended in an error" in capsys.readouterr().out


def test_pg_run_with_max_cost_returns_the_stopped_run(tmp_path: Path) -> None:
    run = pg.run("bfcl_v4", "mini-mt:en", models=[GT], run_dir=tmp_path, limit=1, variants=["python->python,False"])
    with sqlite3.connect(tmp_path / "conversations.sqlite3") as db:
        db.execute("UPDATE calls SET cost_usd = 0.25")
    again = pg.run("bfcl_v4", "mini-mt:en", models=[GT], run_dir=tmp_path, limit=2, max_cost=0.1,
                   variants=["python->python,False"])
    assert isinstance(again, pg.ConversationRun) and again.summary.stopped == "max_cost"
    assert again.summary.steps_sent == 0 and again.spend() == pytest.approx(0.25 * run.summary.steps_sent)
    frame = again.to_pandas()
    assert len(frame) == 1 and json.loads(frame.to_json(orient="records"))[0]["valid"] is True


# --------------------------------------------------------------------------- adaptive concurrency

class Queueing:
    """Answers as ``fake/ground-truth`` after ``seconds`` each, counting the steps in flight at once."""

    takes_episode = True

    def __init__(self, seconds: float) -> None:
        self.inner, self.name, self.seconds = ScriptedClient(GT), GT, seconds
        self.in_flight = self.most = self.sent = 0

    async def complete(self, messages: Any, params: Mapping[str, Any], *, request: Mapping[str, Any] | None = None,
                       episode: EpisodeContext | None = None) -> Completion:
        self.in_flight += 1
        self.sent += 1
        self.most = max(self.most, self.in_flight)
        try:
            await asyncio.sleep(self.seconds)
            return await self.inner.complete(messages, params, request=request, episode=episode)
        finally:
            self.in_flight -= 1

    async def aclose(self) -> None:
        pass


def test_steps_in_flight_adapt_to_a_slow_server_as_single_turn_calls_do(tmp_path: Path,
                                                                       mini: list[Conversation]) -> None:
    """The single-turn runner's ``Adaptive`` limit: answers in over half the timeout keep one step in flight
    (a one-slot server); quick answers let the model's whole concurrency run."""
    slow = Queueing(0.3)
    summary = run_conversations([PROMPT], mini[:2], models=[GT], run_dir=tmp_path / "slow", clients={GT: slow},
                                concurrency=4, timeouts={GT: 0.58})
    assert summary.valid == summary.episodes == 2 and summary.errors == 0
    assert slow.most == 1 and summary.concurrency == {GT: [1, 1, 4]}

    quick = Queueing(0.01)
    summary = run_conversations([PROMPT, NATIVE], mini, models=[GT], run_dir=tmp_path / "quick",
                                clients={GT: quick}, concurrency=4, timeouts={GT: 60.0})
    assert summary.valid == summary.episodes == 6
    assert quick.most == 4 and summary.concurrency == {GT: [4, 4, 4]}
    one = run_conversations([PROMPT], mini[:1], models=[GT], run_dir=tmp_path / "one", clients={GT: Queueing(0)},
                            concurrency=1)
    assert one.valid == 1 and one.concurrency == {}  # one episode at a time: nothing to adapt
