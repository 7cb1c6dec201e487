"""A run stopped before its lanes are driven returns at once, for both kinds.

``signals.Stopper`` (``pg.run`` inside a running event loop, on a worker thread) remembers a Ctrl-C pressed
before the run could be stopped and stops it as soon as it starts; a single-turn run is also given its
``Runner`` before it runs (``execute(started=...)``). Until 2062c75's engine took it over (checked at
cb80e39), a single-turn run stopped so waited for ever: its producer ended without waking its workers. A
conversation run's producers are then cancelled before they start, and its episodes are still counted as not
run.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from promptgrid.matrix.clients._fake import FakeClient
from promptgrid.matrix.running.session import execute
from promptgrid.matrix.running.store import RunStore
from support.builders import bfcl_variants, numbered_cases
from support.running import config, prepared, stand_in_score

MODEL = "fake/auto"


def test_a_single_turn_run_stopped_before_it_starts_returns_with_nothing_sent(tmp_path: Path) -> None:
    client = FakeClient(MODEL)

    async def main() -> Any:
        return await asyncio.wait_for(execute(
            prepared(config(tmp_path, model=MODEL, concurrency=4), bfcl_variants(2), numbered_cases(5)),
            scorer=stand_in_score, clients={MODEL: client}, started=lambda runner: runner.stop("interrupted")), 30)

    summary = asyncio.run(main())
    assert summary.stopped == "interrupted" and summary.sent == 0
    with RunStore(tmp_path, readonly=True) as store:
        assert store.counts()["done"] == 0


def test_a_conversation_run_stopped_as_it_starts_returns_with_every_episode_left(tmp_path: Path) -> None:
    from promptgrid.matrix.conversations import load_conversations
    from promptgrid.variants import Variant
    from support.episodes import run_conversations

    conversations = load_conversations("mini-mt:en")[:2]
    summary = run_conversations([Variant()], conversations, models=["fake/ground-truth"], run_dir=tmp_path,
                                on_start=lambda stop: stop())
    assert summary.stopped == "interrupted" and summary.steps_sent == 0
    assert summary.not_run == summary.episodes == 2 and summary.finished == 0
