"""Per-call costs the runner keeps out of its calls (issue 22, runner throughput).

- The results that arrive in one turn of the event loop are committed in one
  transaction (``Runner._finish_soon``, ``RunStore.record_all``); every result
  is still stored, and an interrupted run commits what it had.
- A verdict's stored form is built once (``Verdict.stored``), equal to the
  encoding the store always had.
- ``execute`` raises the GC's young threshold for the run and restores it.
- The language-id model loads on a thread started before the clients' imports.
"""

from __future__ import annotations

import asyncio
import gc
import json
from pathlib import Path
from typing import Any

import pytest

from promptgrid.matrix.clients._fake import FakeClient
from promptgrid.matrix.datasets import load_dataset
from promptgrid.matrix.running.session import execute
from promptgrid.matrix.running.store import RunStore
from promptgrid.matrix.scoring import score
from promptgrid.variants import load_grid
from support.builders import bfcl_variants, numbered_cases
from support.running import config, prepared, stand_in_score

MODEL = "fake/auto"


def run_into(run_dir: Path, client: Any = None, *, concurrency: int = 8) -> Any:
    prep = prepared(config(run_dir, model=MODEL, concurrency=concurrency), bfcl_variants(4), numbered_cases(10))
    return asyncio.run(execute(prep, scorer=stand_in_score, clients={MODEL: client or FakeClient(MODEL)}))


def test_results_of_one_turn_share_a_transaction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int] = []
    real = RunStore.record_all

    def counted(self: RunStore, entries: Any) -> None:
        sizes.append(len(entries))
        real(self, entries)

    monkeypatch.setattr(RunStore, "record_all", counted)
    threshold = gc.get_threshold()
    summary = run_into(tmp_path)
    assert summary.sent == sum(sizes) == 40 and max(sizes) > 1  # fake/auto answers at once: several per turn
    assert len(sizes) < 40
    assert gc.get_threshold() == threshold  # raised for the run only
    with RunStore(tmp_path, readonly=True) as store:
        counts = store.counts()
    assert counts["done"] == 40 and counts["pending"] == 0


class Stalling(FakeClient):
    """Answers the first ``n`` calls, then never answers again."""

    def __init__(self, n: int) -> None:
        super().__init__(MODEL)
        self.left = n

    async def complete(self, messages: Any, params: Any) -> Any:
        if self.left <= 0:
            await asyncio.Event().wait()
        self.left -= 1
        return await super().complete(messages, params)


def test_an_interrupted_run_commits_the_answers_it_had(tmp_path: Path) -> None:
    runners: list[Any] = []

    async def main() -> Any:
        task = asyncio.ensure_future(execute(
            prepared(config(tmp_path, model=MODEL, concurrency=8), bfcl_variants(4), numbered_cases(10)),
            scorer=stand_in_score, clients={MODEL: Stalling(12)}, started=runners.append))
        while not runners or runners[0].summary.sent < 12:
            await asyncio.sleep(0.01)
        runners[0].stop("interrupted")  # what Ctrl-C does: the calls in flight are cancelled
        return await task

    summary = asyncio.run(main())
    assert summary.stopped == "interrupted" and summary.sent == 12
    with RunStore(tmp_path, readonly=True) as store:
        counts = store.counts()
    assert counts["done"] == 12 and counts["pending"] == 28


def test_stored_verdict_is_the_store_encoding() -> None:
    grid, case = load_grid("bfcl_v4"), load_dataset("mini").cases[0]
    for text in ("[f(a=1)]", "I cannot help with that.", ""):
        verdict = score(text, grid.variants[0], case)
        d = verdict.to_dict()
        assert verdict.stored() == (json.dumps(d, separators=(",", ":")), d["valid"], d["error_code"])
        assert verdict.stored() is verdict.stored()  # built once


def test_the_language_model_is_preloaded_once() -> None:
    from promptgrid import languages

    thread = languages.preload_model()
    if thread is not None:
        thread.join(120)
    assert languages._MODEL is not None and languages.preload_model() is None
