"""A planted API key never reaches the run directory (store, WAL, run.json) or the output."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from promptgrid.errors import RunError
from promptgrid.matrix.clients import REDACTED, Redactor
from promptgrid.matrix.clients._redact import redact_url, url_secrets
from promptgrid.matrix.running.store import RunStore
from support.fake_server import FakeScript, FakeServer
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


def test_redactor_knows_credential_names_without_a_known_suffix() -> None:
    r = Redactor(environ={"WATSONX_APIKEY": "w" * 12, "AWS_BEARER_TOKEN_BEDROCK": "b" * 12,
                          "VERTEXAI_CREDENTIALS": "c" * 12, "HOME": "/home/someone"})
    assert (r.exact(f"{'w' * 12} {'b' * 12} {'c' * 12} /home/someone")
            == f"{REDACTED} {REDACTED} {REDACTED} /home/someone")
    r.add_env(["MY_SERVER"], environ={"MY_SERVER": "plain9f8e"})  # a variable a provider reads: whatever its name
    assert r.exact("echo plain9f8e") == f"echo {REDACTED}"


def test_api_base_credentials_are_stripped_and_redacted() -> None:
    url = "https://alice:s3cret-pw@llm.example.com:8443/v1?api_key=XYZ123abc&key=K9K9K9&region=eu&sig=abc%2Bdef"
    assert redact_url(url) == (f"https://{REDACTED}@llm.example.com:8443/v1?api_key={REDACTED}&key={REDACTED}"
                               f"&region=eu&sig={REDACTED}")
    assert redact_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1" and redact_url(None) is None
    assert set(url_secrets(url)) >= {"alice", "s3cret-pw", "XYZ123abc", "K9K9K9", "abc+def", "abc%2Bdef"}
    r = Redactor(environ={})
    r.add_url(url)
    assert r("failed to reach https://alice:s3cret-pw@llm.example.com/v1?key=K9K9K9") == \
        f"failed to reach https://{REDACTED}:{REDACTED}@llm.example.com/v1?key={REDACTED}"


def test_unprefixed_key_echoed_by_the_server_is_nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A key with no known prefix, in a variable with no secret-looking name (api_key_env), echoed back by the
    server in its answers (the text, the model that answered, the finish reason) and its error bodies, and a key in
    api_base: none reaches the run directory or export.
    A password in api_base (user:password@host) is refused before any call, without the password in the message."""
    import asyncio
    import io
    import json

    from promptgrid.matrix.api import Run
    from promptgrid.matrix.cli.run import print_run
    from promptgrid.matrix.running.config import ModelSpec, model_params
    from promptgrid.matrix.running.results import write_results
    from promptgrid.matrix.running.session import execute
    from support.builders import bfcl_variants, numbered_cases
    from support.running import config, prepared, stand_in_score

    key, url_key, password = "q7w8e9r0t1y2", "Zq81Zq81Zq81", "pw0rd4242"
    monkeypatch.setenv("MY_SERVER", key)
    echoing = FakeScript(echo_auth_in_answer=True, echo_auth_in_fields=True, answer="text:[f()]")
    with FakeServer.thread(echoing) as good, \
            FakeServer.thread(FakeScript(status=500, echo_auth_in_error=True)) as bad:
        with pytest.raises(RunError) as refused:
            ModelSpec("openai/userinfo", model_params({}, 1),
                      api_base=good.url.replace("http://", f"http://bob:{password}@"), api_key_env="MY_SERVER")
        assert password not in str(refused.value) and "user name or password" in str(refused.value)
        bases = {"openai/echo": f"{good.url}?api_key={url_key}", "openai/broken": f"{bad.url}?api_key={url_key}"}
        models = [ModelSpec(name, model_params({}, 1), api_base=b, api_key_env="MY_SERVER")
                  for name, b in bases.items()]
        prep = prepared(config(tmp_path, models=models, max_retries=0), bfcl_variants(1), numbered_cases(2))
        summary = asyncio.run(execute(prep, scorer=stand_in_score))
        assert all(r["authorized"] for r in good.requests() + bad.requests())  # the key really was sent
    out, err = io.StringIO(), io.StringIO()
    print_run(Run(tmp_path, summary=summary), out, err)
    write_results(RunStore(tmp_path, readonly=True).rows(), tmp_path / "export.jsonl")
    with RunStore(tmp_path) as store:
        rows = list(store.rows())
    assert {r.status for r in rows} == {"done", "error"}, [(r.model, r.status, r.error) for r in rows]
    echoed = rows
    assert len(echoed) == 4 and all(REDACTED in (r.response or r.error or "") for r in echoed)  # echoed, redacted
    assert {r.raw_model for r in rows if r.status == "done"} == {f"Bearer {REDACTED}"}  # the model field, too
    for secret in (key, url_key, password):
        assert grep_dir(tmp_path, secret.encode()) == [], secret
        assert secret not in out.getvalue() + err.getvalue()
    recorded = [m["api_base"] for m in json.loads((tmp_path / "run.json").read_text())["config"]["models"]]
    assert recorded[0].endswith(f"/v1?api_key={REDACTED}") and recorded[1].endswith(f"/v1?api_key={REDACTED}")
