"""Crash safety: SIGKILL half-way, re-run, and nothing stored is ever sent again."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from promptgrid.matrix.running.store import RunStore
from support.fake_server import FakeScript, FakeServer
from support.running import child_command, child_env


def child(opts: dict, **kw) -> subprocess.Popen:
    return subprocess.Popen(child_command(opts), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=child_env(), **kw)


def stored_calls(run_dir: Path) -> int:
    path = run_dir / "store.sqlite3"
    if not path.exists():
        return 0
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            return db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
        finally:
            db.close()
    except sqlite3.OperationalError:
        return 0


def wait_for(predicate, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.02)


@pytest.mark.slow
def test_sigkill_then_resume_never_resends_stored(tmp_path: Path) -> None:
    concurrency = 8
    total = 26 * 12
    with FakeServer.subprocess(FakeScript(latency_s=0.05, latency_jitter_s=0.05)) as srv:
        opts = {"run_dir": str(tmp_path), "api_base": srv.url, "cases": 12, "variants": 26,
                "concurrency": concurrency}
        proc = child(opts)
        wait_for(lambda: stored_calls(tmp_path) >= total // 2 or proc.poll() is not None)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL, proc.stderr.read() if proc.stderr else ""
        first_log = srv.requests()
        with RunStore(tmp_path) as store:  # what was committed before the kill
            stored_before = {row[0] for row in store.db.execute("SELECT prompt_sha256 FROM calls")}
        assert total // 2 <= len(stored_before) < total

        proc = child(opts)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        second_log = srv.requests()[len(first_log):]

    resent = [r["hash"] for r in second_log if r["hash"] in stored_before]
    print(f"\ncrash: {len(stored_before)}/{total} stored at the kill, {len(first_log)} requests before it, "
          f"{len(second_log)} after; stored-and-resent: {len(resent)}")
    assert resent == []  # nothing whose answer was stored is paid for twice
    first_hashes = {r["hash"] for r in first_log}
    twice = [r["hash"] for r in second_log if r["hash"] in first_hashes]
    print(f"crash: sent in both runs (in flight at the kill): {len(twice)} (concurrency {concurrency})")
    assert len(twice) <= concurrency  # only the calls in flight at the kill
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["cached"] == len(stored_before)

    with RunStore(tmp_path) as store:
        counts = store.counts()
        assert counts == {**counts, "jobs": total, "done": total, "pending": 0, "errors": 0, "calls": total}
        dup = store.db.execute(
            'SELECT COUNT(*) FROM (SELECT model, variant, "case", repeat FROM jobs GROUP BY 1,2,3,4 HAVING COUNT(*)>1)'
        ).fetchone()[0]
        assert dup == 0
        assert store.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    sent = Counter(r["hash"] for r in first_log + second_log)
    assert stored_before <= set(sent) and len(sent) == total  # every call reached the server


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_and_resumes(tmp_path: Path) -> None:
    with FakeServer.subprocess(FakeScript(latency_s=0.05)) as srv:
        opts = {"run_dir": str(tmp_path), "api_base": srv.url, "cases": 8, "variants": 26, "concurrency": 4}
        proc = child(opts)
        wait_for(lambda: stored_calls(tmp_path) >= 20 or proc.poll() is not None)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert "interrupted" in err and "Run the same command again to resume" in err
        assert "Traceback" not in err
        summary = json.loads(out.strip().splitlines()[-1])
        assert summary["stopped"] == "interrupted"
        with RunStore(tmp_path) as store:
            counts = store.counts()
            assert counts["done"] == summary["sent"] and counts["pending"] == 26 * 8 - counts["done"]
            assert store.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        n_before = len(srv.requests())
        proc = child(opts)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert len(srv.requests()) - n_before <= 26 * 8 - counts["done"] + 4


@pytest.mark.slow
def test_two_processes_one_run_dir(tmp_path: Path) -> None:
    with FakeServer.subprocess(FakeScript(latency_s=0.02)) as srv:
        opts = {"run_dir": str(tmp_path), "api_base": srv.url, "cases": 6, "variants": 26, "concurrency": 8}
        a, b = child(opts), child(opts)
        out_a, err_a = a.communicate(timeout=300)
        out_b, err_b = b.communicate(timeout=300)
        codes = sorted([a.returncode, b.returncode])
        # One runs; the other is refused at once (it would have raced), or, if the first had
        # already finished, finds nothing to send.
        assert codes in ([0, 0], [0, 2]), (err_a, err_b)
        if codes == [0, 2]:
            # the holder's pid, or "another process" when the refused one read the lock file in the moment
            # between the holder's flock and its writing its pid there
            assert "is in use by promptgrid pid" in (err_a + err_b) or "is in use by another process" in (err_a + err_b)
        hashes = srv.sent_hashes()
    assert len(hashes) == len(set(hashes)) == 26 * 6  # no call sent twice
    with RunStore(tmp_path) as store:
        counts = store.counts()
        assert counts["jobs"] == counts["done"] == 26 * 6
        assert store.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
