"""``--batch`` for conversation runs: rounds of provider batches (``_batch.BatchRounds``) against the fake server's
files + batches API. The same requests as online, the same stored steps and verdicts; a run stopped mid-round
resumes from the batch ledger without uploading or batching a step twice; a line the batch did not answer ends
its episode with that error; models without a batch API are refused before anything is sent."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from promptgrid.errors import RunError
from promptgrid.matrix.cli import main
from promptgrid.matrix.conversations import Conversation, load_conversations
from promptgrid.matrix.episodes._environment import call_source
from promptgrid.matrix.running.session import build_config
from support.fake_server import FakeScript, FakeServer
from support.running import batch_uploads

pytest.importorskip("bfcl_eval.eval_checker.multi_turn_eval.func_source_code.travel_booking")  # mini-mt's classes

MODEL = "openai/fake-model"
VARIANT = "python->python,False"


@pytest.fixture(scope="module")
def mini() -> list[Conversation]:
    return load_conversations("mini-mt:en", limit=3)


def truth_answers(conversations: list[Conversation]) -> Any:
    """The fake server's answer: a turn's ground-truth calls (as Python) to the user message that opens the turn,
    a closing sentence to anything else (the calls' results)."""
    by_text: dict[str, str] = {}
    for conversation in conversations:
        for turn, messages in enumerate(conversation.turns):
            calls = conversation.ground_truth[turn]
            if messages and calls:
                by_text[str(messages[-1]["content"])] = "[" + ", ".join(call_source(c, 10_000) for c in calls) + "]"

    def answer(request: dict[str, Any]) -> str:
        last = request["messages"][-1]
        return by_text.get(str(last.get("content")), "Done.") if last.get("role") == "user" else "Done."

    return answer


def _config(path: Path, url: str, run_dir: Path, concurrency: int = 8, **extra: Any) -> Path:
    path.write_text(json.dumps({
        "grid": "bfcl_v4", "dataset": "mini-mt:en", "limit": 3, "run_dir": str(run_dir), "variants": [VARIANT],
        "repeats": 2, "models": [{"name": MODEL, "api_base": url, "concurrency": concurrency}], **extra}),
        encoding="utf-8")
    return path


def _steps(run_dir: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(run_dir / "conversations.sqlite3") as db:
        return sorted(db.execute("SELECT key, response FROM calls"))


def _episodes(run_dir: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(run_dir / "conversations.sqlite3") as db:
        rows = db.execute("SELECT v.variant_id, c.case_id, j.repeat, j.valid, j.verdict FROM jobs j "
                          "JOIN variants v ON v.id = j.variant JOIN cases c ON c.id = j.\"case\"").fetchall()
    return sorted((v, c, r, ok, json.loads(result)["failure_mode"], json.loads(result)["steps"])
                  for v, c, r, ok, result in rows)


def _ledger(run_dir: Path) -> list[str]:
    """The states of the batches recorded in a run directory's store (none while it has no store)."""
    if not (run_dir / "conversations.sqlite3").exists():
        return []
    with sqlite3.connect(run_dir / "conversations.sqlite3") as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        return [state for (state,) in db.execute("SELECT state FROM batches")] if "batches" in tables else []


def test_batch_rounds_store_the_online_steps_and_verdicts(tmp_path: Path, mini: list[Conversation],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    with FakeServer.thread(FakeScript(batch_polls=1), answer_fn=truth_answers(mini)) as server:
        online = tmp_path / "online"
        assert main(["run", str(_config(tmp_path / "o.yaml", server.url, online)), "--no-progress"]) == 0
        sent_online = len(server.requests())
        batch = tmp_path / "batch"
        assert main(["run", str(_config(tmp_path / "b.yaml", server.url, batch)), "--batch", "--poll", "0.01"]) == 0
        assert len(server.requests()) == sent_online  # the batch run sent nothing online
        uploaded, batched = batch_uploads(server)
    err = capsys.readouterr().err
    assert "batch round 1:" in err and "batch round 2:" in err
    assert _steps(batch) == _steps(online)  # the same step keys (the same requests) and the same answers
    assert len(uploaded) == sent_online and set(uploaded.values()) == {1} and set(batched.values()) == {1}
    episodes = _episodes(batch)
    assert episodes == _episodes(online) and len(episodes) == 6
    assert all(ok == 1 for _, _, _, ok, _, _ in episodes)  # the ground truth, answered through batches
    assert not list((batch / "batches").glob("*.jsonl"))  # input files removed once collected
    with sqlite3.connect(batch / "conversations.sqlite3") as db:
        states = Counter(state for (state,) in db.execute("SELECT state FROM batches"))
    assert states == {"collected": sum(states.values())} and sum(states.values()) >= 2


def test_an_adaptive_goal_through_batch_rounds_plans_and_finds_as_online(tmp_path: Path,
                                                                         mini: list[Conversation]) -> None:
    """Issue 32's done-when: a conversation study with ``--goal best-worst --budget`` gives the same results with
    ``--batch`` as online. Each round's episodes go through batch rounds (one batch a step round); the planner sees
    the same outcomes, so it plans the same episodes, and the goal finds the same best and worst variant."""
    import promptgrid as pg

    goal = {"variants": [VARIANT, "python->json,False", "python->python,True"], "goal": "best-worst", "budget": 9,
            "rounds": 3}
    with FakeServer.thread(FakeScript(batch_polls=1), answer_fn=truth_answers(mini)) as server:
        online = tmp_path / "online"
        assert main(["run", str(_config(tmp_path / "o.yaml", server.url, online, **goal)), "--no-progress",
                     "--seed", "3"]) == 0
        sent_online = len(server.requests())
        batch = tmp_path / "batch"
        assert main(["run", str(_config(tmp_path / "b.yaml", server.url, batch, **goal)), "--no-progress",
                     "--seed", "3", "--batch", "--poll", "0.01"]) == 0
        assert len(server.requests()) == sent_online  # the batch run sent nothing online
        uploaded, _batched = batch_uploads(server)
    episodes = _episodes(online)
    assert len(episodes) == 9 and _episodes(batch) == episodes and _steps(batch) == _steps(online)
    assert {ok for _, _, _, ok, _, _ in episodes} == {0, 1}  # the variants differ: the goal has something to find
    assert len(uploaded) == sent_online and set(uploaded.values()) == {1}  # each step batched once
    found = [{model: (r.best.variant_id if r.best else None, r.worst.variant_id if r.worst else None, r.spent)
              for model, r in pg.open_run(run_dir).adaptive(trace=False).items()} for run_dir in (online, batch)]
    assert found[0] == found[1] and found[0][MODEL][0] != found[0][MODEL][1]


def test_a_key_a_batch_round_echoes_beside_its_answers_is_not_stored(tmp_path: Path, mini: list[Conversation],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch output line's finish reason is the provider's text: stored redacted, as the answer is."""
    key = "sk-round-echo-8e1d6c3b2a90"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    run_dir = tmp_path / "batch"
    with FakeServer.thread(FakeScript(batch_polls=1, echo_auth_in_fields=True),
                           answer_fn=truth_answers(mini)) as server:
        assert main(["run", str(_config(tmp_path / "b.yaml", server.url, run_dir)), "--batch", "--poll", "0.01",
                     "--no-progress"]) == 0
    with sqlite3.connect(run_dir / "conversations.sqlite3") as db:
        reasons = {reason for (reason,) in db.execute("SELECT finish_reason FROM calls")}
    assert reasons == {"Bearer [REDACTED]"}  # echoed, and redacted
    assert [p.name for p in run_dir.rglob("*") if p.is_file() and key.encode() in p.read_bytes()] == []


def test_a_run_stopped_mid_round_resumes_from_the_ledger(tmp_path: Path, mini: list[Conversation],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    script = FakeScript(batch_polls=10 ** 6)  # the first round never ends while the first run polls
    with FakeServer.thread(script, answer_fn=truth_answers(mini)) as server:
        run_dir = tmp_path / "run"
        config = build_config(_config(tmp_path / "c.yaml", server.url, run_dir))

        async def first() -> None:
            """Run until the ledger holds a submitted batch, then stop the run (as Ctrl-C would)."""
            from promptgrid.matrix.conversations import arun_conversation_config

            task = asyncio.ensure_future(arun_conversation_config(config, batch=True, batch_poll_s=0.01))
            for _ in range(1200):  # up to a minute: the first litellm import alone can take seconds
                await asyncio.sleep(0.05)
                if _ledger(run_dir) == ["submitted"] or task.done():
                    break
            task.cancel()
            await task

        with pytest.raises(asyncio.CancelledError):
            asyncio.run(first())
        with sqlite3.connect(run_dir / "conversations.sqlite3") as db:
            assert [s for (s,) in db.execute("SELECT state FROM batches")] == ["submitted"]
            assert db.execute("SELECT COUNT(*) FROM calls").fetchone()[0] == 0
        assert main(["status", str(run_dir)]) == 0
        out = capsys.readouterr().out
        assert "batches: 1 (1 submitted)" in out
        assert "1 batch(es) still running: run the same command with --batch" in out
        server._handler.script = dataclasses.replace(script, batch_polls=1)  # type: ignore[union-attr]
        assert main(["run", str(tmp_path / "c.yaml"), "--batch", "--poll", "0.01", "--no-progress"]) == 0
        uploaded, batched = batch_uploads(server)
        assert server.requests() == []
    assert set(uploaded.values()) == {1} and set(batched.values()) == {1}  # nothing uploaded or batched twice
    assert len(_episodes(run_dir)) == 6 and all(ok == 1 for _, _, _, ok, _, _ in _episodes(run_dir))


def test_a_line_the_batch_did_not_answer_ends_its_episode_with_that_error(tmp_path: Path,
                                                                         mini: list[Conversation]) -> None:
    with FakeServer.thread(FakeScript(batch_polls=1, batch_expire_after=2),
                           answer_fn=truth_answers(mini)) as server:
        run_dir = tmp_path / "run"
        assert main(["run", str(_config(tmp_path / "c.yaml", server.url, run_dir)), "--batch", "--poll", "0.01",
                     "--no-progress"]) in (0, 1)
    with sqlite3.connect(run_dir / "conversations.sqlite3") as db:
        rows = [(json.loads(r), valid) for r, valid in db.execute("SELECT verdict, valid FROM jobs")]
    errors = [record["error"] for record, _valid in rows if record["error"] is not None]
    assert errors and all("expired" in e or "before answering" in e for e in errors)
    # An error is a result counted as failed (valid 0), as a single-turn call's: not left unfinished.
    assert all(valid == 0 for record, valid in rows if record["error"] is not None)


def test_a_model_without_a_batch_api_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    assert main(["run", "bfcl_v4", "--dataset", "mini-mt:en", "--model", "fake/ground-truth", "--limit", "1",
                 "--variant", VARIANT, "--batch", "--run-dir", str(tmp_path / "run")]) == 2
    assert not (tmp_path / "run" / "conversations.sqlite3").exists()
    with pytest.raises(RunError, match="single-turn batch run"):
        import promptgrid as pg

        pg.run("bfcl_v4", "mini-mt:en", models=["fake/ground-truth"], run_dir=tmp_path / "api", batch=True,
               batch_wait=False)


def _answer_file(requests: Path, results: Path, answer: Any) -> int:
    """What ``vllm run-batch`` would write for ``requests``: one output line per request, the answer ``answer``
    gives its body."""
    out = []
    for raw in requests.read_text(encoding="utf-8").splitlines():
        request = json.loads(raw)
        body = {"id": "cmpl", "object": "chat.completion", "model": request["body"]["model"],
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": answer(request["body"])}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
        out.append(json.dumps({"id": "r", "custom_id": request["custom_id"], "error": None,
                               "response": {"status_code": 200, "request_id": "q", "body": body}}))
    results.write_text("".join(line + "\n" for line in out), encoding="utf-8")
    return len(out)


def test_export_and_import_rounds_finish_the_study_as_online(tmp_path: Path, mini: list[Conversation],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A vLLM cluster's way: export-batch writes a round, the engine answers it, import-batch stores it, and the
    next export writes the round after, until every episode is finished, with the online run's steps and
    verdicts."""
    answer = truth_answers(mini)
    with FakeServer.thread(FakeScript(), answer_fn=answer) as server:
        online = tmp_path / "online"
        assert main(["run", str(_config(tmp_path / "o.yaml", server.url, online)), "--no-progress"]) == 0
    run_dir = tmp_path / "rounds"
    options = ["--grid", "bfcl_v4", "--dataset", "mini-mt:en", "--limit", "3", "--variant", VARIANT, "--repeats", "2"]
    rounds = 0
    while True:
        requests = tmp_path / f"round{rounds}.jsonl"
        # The first round's --grid, --dataset and selection are recorded: later rounds need only the model.
        assert main(["export-batch", str(run_dir), "--model", MODEL, "-o", str(requests),
                     *(options if rounds == 0 else [])]) == 0
        note = capsys.readouterr().err
        if not requests.read_text(encoding="utf-8"):
            assert "Nothing to export" in note
            break
        assert "import-batch" in note and "wait on this round" in note
        results = tmp_path / f"results{rounds}.jsonl"
        lines = _answer_file(requests, results, answer)
        assert main(["import-batch", str(run_dir), str(results)]) == 0
        assert f"{lines} stored ({lines} answers" in capsys.readouterr().err
        assert main(["import-batch", str(run_dir), str(results)]) == 0  # idempotent
        assert f"{lines} already stored" in capsys.readouterr().err
        rounds += 1
        assert rounds < 10
    assert rounds >= 2
    assert _steps(run_dir) == _steps(online)
    assert _episodes(run_dir) == _episodes(online)


def test_import_refuses_a_line_no_export_wrote_and_stores_nothing(tmp_path: Path) -> None:
    run_dir = tmp_path / "rounds"
    options = ["--grid", "bfcl_v4", "--dataset", "mini-mt:en", "--limit", "1", "--variant", VARIANT]
    requests = tmp_path / "round.jsonl"
    assert main(["export-batch", str(run_dir), "--model", MODEL, "-o", str(requests), *options]) == 0
    results = tmp_path / "results.jsonl"
    _answer_file(requests, results, lambda body: "Done.")
    text = results.read_text(encoding="utf-8")
    results.write_text(text + text.replace('"custom_id": "', '"custom_id": "x'), encoding="utf-8")
    assert main(["import-batch", str(run_dir), str(results)]) == 2
    assert _steps(run_dir) == []
    again = tmp_path / "again.jsonl"  # nothing imported: the next round asks the same steps (the recorded config)
    assert main(["export-batch", str(run_dir), "--model", MODEL, "-o", str(again)]) == 0
    assert [json.loads(line)["custom_id"] for line in again.read_text(encoding="utf-8").splitlines()] == \
        [json.loads(line)["custom_id"] for line in text.splitlines()]
    online = tmp_path / "online"  # a conversation run no export started has no recorded round config
    assert main(["run", "bfcl_v4", "--dataset", "mini-mt:en", "--limit", "1", "--variant", VARIANT, "--model",
                 "fake/ground-truth", "--run-dir", str(online), "--no-progress"]) == 0
    assert main(["export-batch", str(online), "--model", MODEL, "-o", str(tmp_path / "x.jsonl")]) == 2
    assert main(["export-batch", str(run_dir), "--model", MODEL, "--dataset", "mini-mt:en", "-o",
                 str(tmp_path / "y.jsonl")]) == 2  # --dataset without --grid: refused, as for single-turn


@pytest.mark.parametrize("record", ['{"grid": 5, "models": "x"}', '{"grid": "bfcl_v4", "dataset": "mini-mt:en", '
                                    '"limit": "abc"}', "[1, 2]", "null"])
def test_a_damaged_recorded_round_config_is_one_error_and_writes_nothing(tmp_path: Path, record: str,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The store's ``export_config`` is read back as untrusted data: a damaged one is refused with one line, before
    any request is written."""
    run_dir = tmp_path / "rounds"
    options = ["--grid", "bfcl_v4", "--dataset", "mini-mt:en", "--limit", "1", "--variant", VARIANT]
    assert main(["export-batch", str(run_dir), "--model", MODEL, "-o", str(tmp_path / "first.jsonl"), *options]) == 0
    with sqlite3.connect(run_dir / "conversations.sqlite3") as db:
        db.execute("INSERT OR REPLACE INTO meta VALUES ('export_config', ?)", (record,))
    capsys.readouterr()
    out = tmp_path / "next.jsonl"
    assert main(["export-batch", str(run_dir), "--model", MODEL, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and not out.exists()
