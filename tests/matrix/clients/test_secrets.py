"""A planted API key never reaches the run directory (store, WAL, run.json) or the output."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from promptgrid.matrix.clients import REDACTED, Redactor
from promptgrid.matrix.testing.fake_server import FakeScript, FakeServer
from promptgrid.matrix.running.store import RunStore

from support.running import child_command, child_env

KEY = "sk-planted-xyz"


def grep_dir(run_dir: Path, needle: bytes) -> list[str]:
    return [p.name for p in run_dir.iterdir() if p.is_file() and needle in p.read_bytes()]


@pytest.mark.slow
def test_planted_key_appears_nowhere(tmp_path: Path) -> None:
    # Half the calls fail with a 500 whose message quotes the Authorization header.
    script = FakeScript(p_server_error=0.5, echo_auth_in_error=True, latency_s=0.03, seed=3)
    env = child_env(OPENAI_API_KEY=KEY)
    with FakeServer.subprocess(script) as srv:
        opts = {"run_dir": str(tmp_path), "api_base": srv.url, "cases": 6, "variants": 26, "concurrency": 4,
                "max_retries": 0}
        proc = subprocess.Popen(child_command(opts), env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        # Kill it half-way so the WAL is left on disk, then grep every file.
        import time

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            wal = tmp_path / "store.sqlite3-wal"
            if wal.exists() and wal.stat().st_size > 64 * 1024:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        out1, err1 = proc.communicate()
        assert (tmp_path / "store.sqlite3-wal").exists()
        assert grep_dir(tmp_path, KEY.encode()) == []
        proc = subprocess.Popen(child_command(opts), env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        out2, err2 = proc.communicate(timeout=300)
        assert proc.returncode == 0, err2
        assert any(r["authorized"] for r in srv.requests())  # the key really was sent
    assert grep_dir(tmp_path, KEY.encode()) == []
    assert grep_dir(tmp_path, b"planted-xyz") == []  # not even a fragment
    for stream in (out1, err1, out2, err2):
        assert KEY.encode() not in stream
    with RunStore(tmp_path) as store:
        errors = [r.error for r in store.rows() if r.error]
    assert errors and all(REDACTED in e for e in errors)  # the message is kept, the key is not


def test_redactor_env_values_and_patterns() -> None:
    r = Redactor(environ={"OPENAI_API_KEY": "sk-abcdef123456", "MY_TOKEN": "tok_998877665544", "PATH": "/usr/bin",
                          "SHORT_KEY": "abc"})
    text = "key sk-abcdef123456 and tok_998877665544 in /usr/bin; Bearer xyz.abc; api_key=hunter2hunter2"
    red = r(text)
    assert "sk-abcdef123456" not in red and "tok_998877665544" not in red and "hunter2" not in red
    assert "Bearer xyz" not in red and "/usr/bin" in red
    assert r.exact("plain sk-other-value-1") == "plain sk-other-value-1"  # exact() only knows real values
    assert r("AKIAABCDEFGHIJKLMNOP").count(REDACTED) == 1
