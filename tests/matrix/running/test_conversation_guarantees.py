"""What a single-turn run guarantees, a conversation run keeps: one run per run directory (``RunLock``), answers
redacted before they are stored, exported or printed, no mixing of the two kinds in one directory, a model stopped
after an unauthorised key or a Retry-After above the cap, and a clean, true stop on a full disk."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import promptgrid as pg
from promptgrid.errors import RunError, StoreFullError
from promptgrid.matrix.cli import main
from promptgrid.matrix.clients._base import Completion
from promptgrid.matrix.conversations import (
    Conversation,
    EpisodeContext,
    ScriptedClient,
    conversation_store,
    load_conversations,
)
from promptgrid.matrix.running.store import RunStore
from promptgrid.providers import ErrorKind, RetryPolicy, call_error
from promptgrid.variants import Variant
from support.episodes import run_conversations

pytest.importorskip("bfcl_eval.eval_checker.multi_turn_eval.func_source_code.gorilla_file_system")

GT = "fake/ground-truth"
PROMPT = Variant()
NATIVE = Variant(call_mode="native")
CONVERSATION_RUN = ["run", "call_modes", "--dataset", "bfcl:multi_turn_base", "--variant", "native", "--variant",
                    "json->json,False", "--no-progress"]


@pytest.fixture(scope="module")
def base() -> list[Conversation]:
    return load_conversations("bfcl:multi_turn_base", limit=3)


class Counting:
    """Answers as ``fake/ground-truth``, counting the calls (optionally held at the first until ``release``)."""

    takes_episode = True

    def __init__(self, hold: bool = False) -> None:
        self.inner = ScriptedClient(GT)
        self.name = GT
        self.calls = 0
        self.hold = hold
        self.entered = threading.Event()
        self.release = threading.Event()

    async def complete(self, messages: Any, params: Mapping[str, Any], *, request: Any = None,
                       episode: EpisodeContext | None = None) -> Completion:
        self.calls += 1
        if self.hold:
            self.hold = False
            self.entered.set()
            await asyncio.to_thread(self.release.wait, 30)
        return await self.inner.complete(messages, params, request=request, episode=episode)

    async def aclose(self) -> None:
        pass


class Failing:
    """Every call fails with ``kind`` (and ``retry_after``); counts the attempts."""

    takes_episode = True

    def __init__(self, kind: ErrorKind, retry_after: float | None = None) -> None:
        self.name = "bad"
        self.kind, self.retry_after = kind, retry_after
        self.attempts = 0

    async def complete(self, messages: Any, params: Mapping[str, Any], *, request: Any = None,
                       episode: EpisodeContext | None = None) -> Completion:
        self.attempts += 1
        await asyncio.sleep(0.01)  # the other episodes of the model are started meanwhile
        raise call_error(self.kind, "401 Unauthorized: invalid key" if self.kind is ErrorKind.AUTH else "slow down",
                         retry_after=self.retry_after)

    async def aclose(self) -> None:
        pass


class QuietEnv:
    """An environment that runs nothing (the tests here are about the runner, not the simulated APIs)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def run(self, calls: Any) -> list[Any]:
        from promptgrid.matrix.episodes._environment import CallOutcome

        return [CallOutcome(call, True, "ok") for call in calls]

    def state(self) -> dict[str, Any]:
        return {}

    def usage(self) -> Any:
        from promptgrid.matrix.episodes._environment import EnvironmentUsage

        return EnvironmentUsage(1, 0.0, 0, 0, 1.0, {})

    def close(self) -> None:
        pass


# --------------------------------------------------------------------------- 1. one run per run directory

def test_a_second_run_into_a_run_directory_in_use_stops_at_once_and_pays_nothing(
        tmp_path: Path, base: list[Conversation], capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    first = Counting(hold=True)
    box: dict[str, Any] = {}

    def run_first() -> None:
        box["summary"] = run_conversations([PROMPT, NATIVE], base[:2], models=[GT], run_dir=run_dir,
                                           clients={GT: first})

    thread = threading.Thread(target=run_first)
    thread.start()
    try:
        assert first.entered.wait(30)  # the first run holds the directory, its first call in flight
        second = Counting()
        with pytest.raises(RunError, match="in use by promptgrid pid"):
            run_conversations([PROMPT, NATIVE], base[:2], models=[GT], run_dir=run_dir, clients={GT: second})
        assert second.calls == 0
        # The CLI: exit 2 with the message, nothing sent.
        assert main([*CONVERSATION_RUN, "--model", GT, "--limit", "2", "--run-dir", str(run_dir)]) == 2
        assert "is in use by promptgrid pid" in capsys.readouterr().err
    finally:
        first.release.set()
        thread.join(60)
    summary = box["summary"]
    assert (summary.finished, summary.valid, summary.errors) == (4, 4, 0)
    with conversation_store(run_dir) as store:
        assert store.step_count() == summary.steps_sent == first.calls  # every answer paid once, stored once
    again = run_conversations([PROMPT, NATIVE], base[:2], models=[GT], run_dir=run_dir, clients={GT: Counting()})
    assert again.skipped == 4 and again.steps_sent == 0  # the lock is released when the run ends


# --------------------------------------------------------------------------- 2. redaction of answers

def test_a_key_the_server_echoes_in_its_answers_is_in_no_file_export_or_output(
        tmp_path: Path, base: list[Conversation], monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    from promptgrid.matrix.running import conversation_runner as _run
    from support.fake_server import FakeScript, FakeServer

    key = "zz-guard-echoed-7f3a9c1d5e2b"
    monkeypatch.setenv("GUARD_ENDPOINT_VALUE", key)  # a name that does not look secret: --api-key-env names it
    monkeypatch.setattr(_run, "Environment", QuietEnv)
    run_dir = tmp_path / "run"
    config = tmp_path / "run.yaml"  # JSON is YAML
    args = ["run", str(config), "--no-progress"]
    with FakeServer.thread(FakeScript(answer="prose", echo_auth_in_answer=True)) as srv:
        config.write_text(json.dumps({
            "grid": "call_modes", "dataset": "bfcl:multi_turn_base", "limit": 2, "run_dir": str(run_dir),
            "variants": ["native", "json->json,False"],
            "models": [{"name": "openai/x", "api_base": srv.url, "api_key_env": "GUARD_ENDPOINT_VALUE",
                        "concurrency": 1}]}), encoding="utf-8")
        assert main(args) == 0
        capfd.readouterr()  # the summary printed (checked with the export's output below)
        sent = len(srv.requests())
        assert sent > 0
        with conversation_store(run_dir) as store:
            assert store.step_count() == sent
            answers = [row[0] for row in store.db.execute("SELECT response FROM calls")]
        assert all("[REDACTED]" in a for a in answers)  # the echo happened, and was redacted (text and envelope)
        assert any(a.startswith("{") for a in answers) and any(not a.startswith("{") for a in answers)
        # Resume: the transcript is rebuilt from the same redacted text, so every step's key is found again.
        db = sqlite3.connect(run_dir / "conversations.sqlite3")
        db.execute("DELETE FROM jobs")
        db.commit()
        db.close()
        assert main(args) == 0
        assert len(srv.requests()) == sent  # nothing sent again
    assert main(["export", str(run_dir)]) == 0
    exported = capfd.readouterr()
    assert "[REDACTED]" in exported.out  # the final answers are in the export
    assert main(["export", str(run_dir), "--output", str(tmp_path / "episodes.jsonl")]) == 0
    output = capfd.readouterr()
    files = [p for p in [*run_dir.iterdir(), tmp_path / "episodes.jsonl"] if p.is_file()]
    assert len(files) >= 3
    found = [p.name for p in files if key.encode() in p.read_bytes()]
    assert found == []
    assert key not in exported.out + exported.err + output.out + output.err


def test_a_step_keeps_its_attempts_the_model_the_provider_named_redacted_and_the_endpoint_as_a_call_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """A conversation step's row keeps what a single-turn call's keeps: the attempts it took (a 429 first), the
    model name the provider reported (redacted: this server puts the key there) and the endpoint that answered."""
    from promptgrid.matrix.running import conversation_runner as _run
    from support.fake_server import FakeScript, FakeServer

    key = "zz-guard-fields-2b7e4c9a1f"
    monkeypatch.setenv("GUARD_ENDPOINT_VALUE", key)
    monkeypatch.setattr(_run, "Environment", QuietEnv)
    run_dir, config = tmp_path / "run", tmp_path / "run.yaml"
    with FakeServer.thread(FakeScript(answer="prose", fail_first=1, retry_after_s=0.0,
                                      echo_auth_in_fields=True)) as srv:
        config.write_text(json.dumps({
            "grid": "call_modes", "dataset": "bfcl:multi_turn_base", "limit": 1, "run_dir": str(run_dir),
            "variants": ["json->json,False"],
            "models": [{"name": "openai/x", "api_base": srv.url, "api_key_env": "GUARD_ENDPOINT_VALUE",
                        "concurrency": 1}]}), encoding="utf-8")
        assert main(["run", str(config), "--no-progress"]) == 0
        out = capfd.readouterr().out
    with conversation_store(run_dir) as store:
        rows = store.db.execute("SELECT attempts, raw_model, endpoint FROM calls").fetchall()
    assert f"{len(rows)} steps sent (0 ended in an error, {2 * len(rows)} attempts)" in out  # as a call's line
    assert rows and all(attempts == 2 for attempts, _model, _endpoint in rows)
    assert all(isinstance(model, str) and "[REDACTED]" in model and key not in model for _a, model, _e in rows)
    assert {endpoint for _a, _m, endpoint in rows} == {srv.url}


# --------------------------------------------------------------------------- 3. one kind per run directory

def test_single_turn_and_conversation_runs_do_not_mix_in_one_directory(
        tmp_path: Path, base: list[Conversation], capsys: pytest.CaptureFixture[str]) -> None:
    conversations = tmp_path / "conversations"
    assert main([*CONVERSATION_RUN, "--model", GT, "--limit", "1", "--run-dir", str(conversations)]) == 0
    before = sorted(p.name for p in conversations.iterdir())
    capsys.readouterr()
    single = ["run", "bfcl_v4", "--dataset", "mini", "--model", "fake/auto", "--limit", "1", "--no-progress"]
    for extra in ([], ["--append"], ["--dry-run"]):
        assert main([*single, "--run-dir", str(conversations), *extra]) == 2
        err = capsys.readouterr().err
        assert "holds a conversation study" in err and "another --run-dir" in err, err
    assert sorted(p.name for p in conversations.iterdir()) == before  # no store.sqlite3, no run.json

    single_dir = tmp_path / "single"
    assert main([*single, "--run-dir", str(single_dir)]) == 0
    before = sorted(p.name for p in single_dir.iterdir())
    capsys.readouterr()
    for extra in ([], ["--dry-run"]):
        assert main([*CONVERSATION_RUN, "--model", GT, "--limit", "1", "--run-dir", str(single_dir), *extra]) == 2
        err = capsys.readouterr().err
        assert "holds a single-turn study" in err and "another --run-dir" in err, err
    client = Counting()
    with pytest.raises(RunError, match="holds a single-turn study"):
        run_conversations([PROMPT], base[:1], models=[GT], run_dir=single_dir, clients={GT: client})
    assert client.calls == 0
    assert sorted(p.name for p in single_dir.iterdir()) == before  # no conversations.sqlite3


# --------------------------------------------------------------------------- 4. a model stopped, the others go on

def test_an_unauthorised_key_costs_one_request_per_model_and_the_other_model_goes_on(
        tmp_path: Path, base: list[Conversation]) -> None:
    bad, good = Failing(ErrorKind.AUTH), Counting()
    summary = run_conversations([PROMPT, NATIVE], base, models=["bad", GT], run_dir=tmp_path,
                                clients={"bad": bad, GT: good}, concurrency=4)
    assert bad.attempts == 1  # 6 episodes of the model, one request
    assert list(summary.halted) == ["bad"] and "invalid key" in summary.halted["bad"]
    assert (summary.episodes, summary.errors, summary.not_run) == (12, 1, 5)
    # The other model's episodes all ran; the one that got the 401 is an error, counted as failed.
    assert (summary.finished, summary.valid) == (7, 6)
    with conversation_store(tmp_path) as store:
        stored = store.episodes(models=["bad"])
    assert len(stored) == 1 and stored[0].status == "error" and stored[0].valid is False  # the rest not stored
    # Fixed, the same run runs the episodes the stop left; the error is a result (as a single-turn call's) ...
    later = run_conversations([PROMPT, NATIVE], base, models=["bad", GT], run_dir=tmp_path,
                              clients={"bad": Counting(), GT: Counting()})
    assert (later.skipped, later.finished, later.valid, later.errors, later.not_run) == (7, 12, 11, 1, 0)
    assert not later.halted
    # ... which --retry-errors plays again.
    again = run_conversations([PROMPT, NATIVE], base, models=["bad", GT], run_dir=tmp_path,
                              clients={"bad": Counting(), GT: Counting()}, retry_errors=True)
    assert (again.skipped, again.finished, again.valid, again.errors) == (11, 12, 12, 0)


class NoTools(Counting):
    """Answers as ``fake/ground-truth`` but cannot be sent native tools (a model without tool support)."""

    def __init__(self, supports_tools: bool = False) -> None:
        super().__init__()
        self.supports_tools = supports_tools

    def unsupported(self, request: Any) -> str | None:
        if request.get("call_mode") == "native" and not self.supports_tools:
            return "this model has no tool calling"
        return None


def test_a_variant_the_model_cannot_be_sent_is_unsupported_out_of_the_rates_and_checked_again_each_run(
        tmp_path: Path, base: list[Conversation]) -> None:
    client = NoTools()
    summary = run_conversations([PROMPT, NATIVE], base, models=[GT], run_dir=tmp_path, clients={GT: client})
    # As a single-turn job of a call mode its model cannot do: nothing sent, no verdict, out of every rate.
    assert (summary.finished, summary.valid, summary.errors, summary.unsupported) == (3, 3, 0, 3)
    native = [r for r in summary.results if r.variant_id == NATIVE.id]
    assert len(native) == 3 and all(r.status == "unsupported" and r.valid is None and not r.scored for r in native)
    assert all("no tool calling" in (r.error or "") and r.row().error_kind == "unsupported" for r in native)
    run = pg.open_run(tmp_path)
    assert [(a.variant_id, a.n) for a in run.accuracy()] == [(PROMPT.id, 3)]
    assert run.counts()["unsupported"] == 3 and run.pending() == 0
    (row,) = pg.status(tmp_path).to_dict()["models"]
    assert (row["episodes"], row["finished"], row["unsupported"], row["unfinished"]) == (6, 3, 3, 0)
    # Each run checks them again: once the model supports tools they are played.
    later = run_conversations([PROMPT, NATIVE], base, models=[GT], run_dir=tmp_path,
                              clients={GT: NoTools(supports_tools=True)})
    assert (later.skipped, later.finished, later.valid, later.unsupported) == (3, 6, 6, 0)


def test_a_retry_after_above_the_cap_is_waited_once_per_model_then_stops_it(
        tmp_path: Path, base: list[Conversation]) -> None:
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def fake_sleep(delay: float, *args: Any, **kwargs: Any) -> Any:
        waits.append(delay)
        return await real_sleep(0)

    bad = Failing(ErrorKind.RATE_LIMIT, retry_after=100000.0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("promptgrid.matrix.running.sending.asyncio.sleep", fake_sleep)
        summary = run_conversations([PROMPT, NATIVE], base, models=["bad", GT], run_dir=tmp_path,
                                    clients={"bad": bad, GT: Counting()}, concurrency=4,
                                    retry_policy=RetryPolicy(max_attempts=4, retry_after_cap=120.0))
    # One capped wait, then the model stops (not one wait per episode); the 0.01 s are the client's own.
    assert [w for w in waits if w >= 1] == [120.0] and bad.attempts == 2
    assert "Retry-After" in summary.halted["bad"] and "retry-after cap of 120 s" in summary.halted["bad"]
    assert (summary.errors, summary.not_run, summary.finished, summary.valid) == (1, 5, 7, 6)


def test_the_cli_names_a_stopped_model_and_a_401_over_http_costs_one_request(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from promptgrid.matrix.running import conversation_runner as _run
    from support.fake_server import FakeScript, FakeServer

    monkeypatch.setattr(_run, "Environment", QuietEnv)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-0000")
    with FakeServer.thread(FakeScript(status=401)) as srv:
        code = main([*CONVERSATION_RUN, "--model", "openai/x", "--api-base", srv.url, "--limit", "3",
                     "--run-dir", str(tmp_path / "run")])
        assert len(srv.requests()) == 1  # 2 variants x 3 conversations, one request
    out = capsys.readouterr().out
    assert code == 1
    # The model's stop says what a single-turn run says of it (the one send path): the provider's refusal, and what
    # to check.
    assert "model openai/x stopped: " in out and "refused by the provider" in out, out
    assert "5 episode(s) not run" in out, out


# --------------------------------------------------------------------------- 5. a full disk

def test_a_full_disk_stops_the_run_cleanly_spills_what_it_received_and_a_rerun_sends_it_not_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    real = RunStore.add_step
    stored = [0]

    def add_step(self: RunStore, *args: Any) -> None:
        if stored[0] >= 3:
            raise StoreFullError(f"disk full at {self.run_dir} (database or disk is full).")
        stored[0] += 1
        real(self, *args)

    run_dir = tmp_path / "run"
    args = [*CONVERSATION_RUN, "--model", GT, "--limit", "2", "--run-dir", str(run_dir), "--no-progress"]
    with monkeypatch.context() as patch:
        patch.setattr(RunStore, "add_step", add_step)
        assert main(args) == 2
    out, err = capfd.readouterr()
    assert "disk full at" in err and "the conversation run stopped" in err
    assert "the 3 answer(s) this run stored are kept" in err
    # The steps in flight when the disk filled (one per episode under way) were answered: kept beside the store.
    found = re.search(r"(\d+) answer\(s\) received as the disk filled are kept in spill-\d+\.jsonl and stored by "
                      r"the next run, not sent again", err)
    assert found is not None and int(found.group(1)) >= 1, err
    spilled = int(found.group(1))
    assert "Traceback" not in out + err and "Task exception" not in out + err
    with conversation_store(run_dir) as store:
        assert store.step_count() == 3 and store.episode_count() == 0
    assert len(list(run_dir.glob("spill-*.jsonl"))) == 1
    assert main(args) == 0  # the disk has room again: the same command stores the spilled answers, then resumes
    out = capfd.readouterr().out
    assert f"{spilled} answer(s) an earlier run spilled on a full disk were stored first" in out, out
    assert "4 finished" in out and f"{3 + spilled} read back from the store" in out, out
    assert not list(run_dir.glob("spill-*.jsonl"))  # stored, then removed (and this run's reservation too)
    with conversation_store(run_dir) as store:
        assert store.episode_count() == 4 and all(e.valid for e in store.episodes())


def test_an_answer_neither_the_store_nor_the_spill_file_takes_is_said_to_be_sent_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    def add_step(self: RunStore, *args: Any) -> None:
        raise StoreFullError(f"disk full at {self.run_dir} (database or disk is full).")

    def spill(self: RunStore, *args: Any) -> None:
        raise OSError(28, "No space left on device")

    args = [*CONVERSATION_RUN, "--model", GT, "--limit", "1", "--run-dir", str(tmp_path / "run"), "--no-progress"]
    with monkeypatch.context() as patch:
        patch.setattr(RunStore, "add_step", add_step)
        patch.setattr(RunStore, "spill", spill)
        assert main(args) == 2
    err = capfd.readouterr().err
    assert "could not be stored and will be sent again" in err and "kept in spill-" not in err, err


def test_a_401_costs_a_single_turn_run_one_request_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The one send path (``sending.send``) sends a model's first call alone for both kinds: 26 variants x 3
    cases at concurrency 8 cost one request, not eight, when the key is refused."""
    from support.fake_server import FakeScript, FakeServer

    monkeypatch.setenv("OPENAI_API_KEY", "test-key-0000")
    with FakeServer.thread(FakeScript(status=401)) as srv:
        code = main(["run", "bfcl_v4", "--dataset", "mini:en", "--limit", "3", "--model", "openai/x",
                     "--api-base", srv.url, "--concurrency", "8", "--run-dir", str(tmp_path / "run")])
        assert len(srv.requests()) == 1
    assert code == 1
    assert "refused by the provider" in capsys.readouterr().err


# --------------------------------------------------------------------------- 6. Ctrl-C and SIGTERM

@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_stops_a_conversation_run_cleanly_and_the_same_command_resumes(tmp_path: Path, sig: str) -> None:
    """As a single-turn run: the run stops, says what it kept, exits 130, leaves no spill reservation and an
    intact store; the same command then runs only what was not finished (SIGTERM used to kill it on the spot)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from support.fake_server import FakeScript, FakeServer
    from support.running import child_env

    run_dir = tmp_path / "run"
    with FakeServer.thread(FakeScript(latency_s=0.2, answer="prose")) as srv:
        command = [sys.executable, "-m", "promptgrid.matrix.cli", "run", "call_modes", "--dataset",
                   "bfcl:multi_turn_base", "--limit", "12", "--variant", "json->python,False", "--model",
                   "openai/fake-model", "--api-base", srv.url, "--concurrency", "2", "--run-dir", str(run_dir)]
        env = child_env(LITELLM_LOCAL_MODEL_COST_MAP="True")
        env.pop("OPENAI_API_KEY", None)
        child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while not (run_dir / "conversations.sqlite3").exists() or _episodes_stored(run_dir) < 2:
            assert time.monotonic() < deadline and child.poll() is None, child.communicate()
            time.sleep(0.1)
        child.send_signal(getattr(signal, sig))
        out, err = child.communicate(timeout=120)
        assert child.returncode == 130, err[-2000:]
        assert "interrupted: every answer received is saved in" in err and "Traceback" not in err + out
        assert not list(run_dir.glob("spill-*.jsonl"))  # the reservation is given back
        kept, sent = _episodes_stored(run_dir), len(srv.requests())
        assert 2 <= kept < 12
        again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr[-2000:]
        assert f"({kept} already in the store)" in again.stdout
    assert _episodes_stored(run_dir) == 12
    assert os.path.getsize(run_dir / "conversations.sqlite3") > 0 and sent > 0


def _episodes_stored(run_dir: Path) -> int:
    with sqlite3.connect(f"file:{run_dir / 'conversations.sqlite3'}?mode=ro", uri=True) as db:
        try:
            return int(db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0])
        except sqlite3.OperationalError:  # the tables are not made yet
            return 0


@pytest.mark.parametrize("dataset", ["mini", "bfcl:multi_turn_base"], ids=["single-turn", "conversations"])
def test_ctrl_c_in_a_notebook_stops_the_run_and_returns_it_for_both_kinds(tmp_path: Path, dataset: str) -> None:
    """``pg.run`` inside a running event loop (Jupyter) runs on a worker thread's loop; Ctrl-C while it waits stops
    the run there as a signal would, and the ``Run`` comes back with ``summary.stopped == "interrupted"``, for
    either kind (a conversation run used to re-raise ``KeyboardInterrupt`` and return nothing)."""
    import asyncio
    import signal
    import time

    from support.fake_server import FakeScript, FakeServer

    def raise_interrupt(*_: Any) -> None:  # what a notebook kernel does with Ctrl-C
        raise KeyboardInterrupt

    main = threading.main_thread().ident
    assert main is not None
    previous = signal.signal(signal.SIGINT, raise_interrupt)  # (asyncio.run then keeps its hands off SIGINT)
    try:
        with FakeServer.thread(FakeScript(latency_s=0.2, answer="prose")) as srv:
            def ctrl_c_once_answers_arrive() -> None:
                deadline = time.monotonic() + 60
                while len(srv.requests()) < 6 and time.monotonic() < deadline:
                    time.sleep(0.05)
                signal.pthread_kill(main, signal.SIGINT)  # a real signal: it wakes the main thread's wait

            async def notebook_cell() -> Any:
                threading.Thread(target=ctrl_c_once_answers_arrive, daemon=True).start()
                grid = "call_modes" if dataset.startswith("bfcl") else "bfcl_v4"
                return pg.run(grid, dataset, models=["openai/fake-model"], api_base=srv.url, limit=12,
                              concurrency=2, run_dir=tmp_path / "run")

            run = asyncio.run(notebook_cell())
            sent = len(srv.requests())
    finally:
        signal.signal(signal.SIGINT, previous)
    assert run.summary.stopped == "interrupted" and sent >= 6
    if run.kind == "single":  # stopped part-way: what is left is pending, for the same command
        assert run.pending() not in (0, None)
    else:  # the episodes under way are not stored: the same command runs them
        assert len(run.episodes()) < run.summary.episodes
