"""Adaptive concurrency: the AIMD limit, and a one-slot server that queues calls answered without a timeout."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

from promptgrid.matrix.running.adaptive import Adaptive
from promptgrid.matrix.running.config import ModelSpec, model_params
from promptgrid.matrix.running.progress import Progress
from promptgrid.matrix.running.session import execute
from promptgrid.matrix.running.store import RunStore
from support.builders import bfcl_variants, numbered_cases
from support.fake_server import FakeScript, FakeServer
from support.running import answer_right, config, prepared, stand_in_score


def test_quick_answers_raise_the_limit_to_the_ceiling_and_no_further() -> None:
    limit = Adaptive(8, timeout=120)
    assert limit.allowed == 1  # one call, whose answer says how many fit
    limit.answered(2.0, 0)
    assert limit.allowed == 8  # 120 / (2 x 2) = 30 a one-at-a-time server could queue: the ceiling
    for _ in range(20):
        limit.answered(2.0, 0)
    assert limit.allowed == 8 and limit.describe() is None and limit.decreases == 0 and limit.lowest == 8


def test_a_timeout_halves_the_limit_once_per_round() -> None:
    limit = Adaptive(8, timeout=120, start=8)
    sent = limit._round
    limit.timed_out(sent)
    assert limit.allowed == 4 and limit.describe() == "concurrency 4/8"
    for _ in range(3):  # the calls sent beside it time out too: the same congestion, not halved again
        limit.timed_out(sent)
    assert limit.allowed == 4 and limit.decreases == 1
    limit.timed_out(limit._round)  # a call sent after the decrease
    assert limit.allowed == 2 and limit.lowest == 2
    for _ in range(3):  # after a decrease the limit grows by about one per round, not one per answer
        limit.answered(1.0, limit._round)
    assert limit.allowed == 3


def test_latency_climbing_towards_the_timeout_lowers_the_limit() -> None:
    limit = Adaptive(8, timeout=120, start=4)
    limit.answered(20.0, 0)  # the baseline: one call served alone
    limit.answered(40.0, 0)  # queued behind one: neither quick nor slow
    assert limit.allowed == 4
    limit.answered(65.0, 0)  # past half the timeout
    assert limit.allowed == 2
    fresh = Adaptive(8, timeout=120, start=4)
    fresh.answered(10.0, 0)
    assert fresh.allowed == 6  # 120 / (2 x 10)
    fresh.answered(35.0, 0)  # over a quarter of the timeout and over twice the baseline
    assert fresh.allowed == 3
    slot = Adaptive(8, timeout=120)
    slot.answered(20.0, 0)  # one slot, 20 s a call: three queued answer within 60 s
    assert slot.allowed == 3


def test_answers_well_within_the_timeout_never_lower_it() -> None:
    limit = Adaptive(8, timeout=120, start=8)
    for latency in (0.05, 3.0, 14.0, 0.2, 9.0, 29.0):  # a real API: long and short answers, none near the timeout
        limit.answered(latency, 0)
    assert limit.allowed == 8 and limit.decreases == 0


def test_acquire_waits_for_room_and_hands_it_over_in_order() -> None:
    async def main() -> list[str]:
        limit = Adaptive(4, timeout=10, start=2)
        order: list[str] = []

        async def call(name: str, hold: asyncio.Event) -> None:
            await limit.acquire()
            order.append(name)
            await hold.wait()
            limit.release()

        holds = [asyncio.Event() for _ in range(4)]
        tasks = [asyncio.create_task(call(str(i), holds[i])) for i in range(4)]
        await asyncio.sleep(0.01)
        assert order == ["0", "1"] and limit.in_flight == 2
        holds[0].set()
        await asyncio.sleep(0.01)
        assert order == ["0", "1", "2"] and limit.in_flight == 2
        waiting = asyncio.create_task(limit.acquire())
        await asyncio.sleep(0.01)
        waiting.cancel()  # a caller cancelled while it waits leaves no slot taken
        await asyncio.sleep(0.01)
        for h in holds:
            h.set()
        await asyncio.gather(*tasks)
        assert limit.in_flight == 0
        return order

    assert asyncio.run(main()) == ["0", "1", "2", "3"]


def test_progress_line_shows_the_limit_below_the_ceiling() -> None:
    progress = Progress(10, stream=io.StringIO(), enabled=False)
    assert "concurrency" not in progress.line()
    progress.concurrency = "concurrency 2/8"
    assert progress.line().endswith("| concurrency 2/8")


def test_one_slot_server_queueing_calls_is_not_timed_out(tmp_path: Path) -> None:
    """One slot, 0.25 s per answer, calls queued behind it (llama.cpp's server); timeout 1.5 s. Eight calls at
    once would wait up to 2 s: without the adaptive limit the last of them time out (scaled: 20 s a call and
    the default 120 s timeout)."""
    with FakeServer.thread(FakeScript(latency_s=0.25, max_concurrency=1), answer_fn=answer_right) as slot:
        spec = ModelSpec("openai/fake-model", model_params({}, 1), api_bases=(slot.url,), concurrency=8, timeout=1.5)
        prep = prepared(config(tmp_path, models=[spec], max_retries=2), bfcl_variants(2), numbered_cases(8))
        summary = asyncio.run(execute(prep, scorer=stand_in_score))
        timed_out = [r for r in slot.requests() if r["n"] > 0]
    with RunStore(tmp_path, readonly=True) as store:
        rows = store.db.execute("SELECT status, attempts, error_kind FROM calls").fetchall()
    assert len(rows) == 16 and {r[0] for r in rows} == {"done"}
    assert summary.error_kinds == {} and summary.congested == 0
    assert {r[1] for r in rows} == {1} and timed_out == []  # no call sent again: none timed out
    lowest, _, ceiling = summary.concurrency["openai/fake-model"]
    assert ceiling == 8 and lowest < 8
