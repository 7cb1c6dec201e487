"""The LLM translation backend against the fake OpenAI-compatible server on 127.0.0.1: the run's redactor
and retry/timeout policy (a key the server echoes never reaches the message or the store; a hanging server
ends within the timeout with a clear error)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from promptgrid.errors import TranslationError
from promptgrid.translate._llm import LLMBackend
from support.fake_server import FakeScript, FakeServer

pytest.importorskip("litellm")

KEY = "sk-test-echoed-0123456789abcdef"


def test_a_key_echoed_in_a_400_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeServer.thread(FakeScript(status=400, echo_auth_in_error=True)) as server:
        backend = LLMBackend("openai/m", api_base=server.url, sleep=lambda s: None)
        with pytest.raises(TranslationError) as caught:
            backend.translate(["Hello"], "en", "de")
    message = str(caught.value)
    assert KEY not in message and "[REDACTED]" in message and "\n" not in message


def test_a_hanging_server_ends_within_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    notes: list[str] = []
    with FakeServer.thread(FakeScript(p_hang=1.0, hang_s=60)) as server:
        backend = LLMBackend("openai/m", api_base=server.url, timeout=1.0, max_attempts=2, sleep=lambda s: None,
                             on_retry=notes.append)
        started = time.monotonic()
        with pytest.raises(TranslationError, match=r"no answer within 1 s \(2 attempt\(s\)\)"):
            backend.translate(["Hello"], "en", "de")
        took = time.monotonic() - started
        sent = len(server.requests())
    assert took < 10 and sent == 2
    assert len(notes) == 1 and notes[0].startswith("llm:openai/m: no answer within 1 s; retrying in")


def test_a_key_quoted_in_a_translation_is_redacted_before_it_is_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)

    def answer(request: dict[str, Any]) -> str:
        return json.dumps({"translations": [f"Hallo {KEY}"]})

    with FakeServer.thread(FakeScript(), answer_fn=answer) as server:
        out = LLMBackend("openai/m", api_base=server.url).translate(["Hello"], "en", "de")
    assert out == ["Hallo [REDACTED]"]


# --------------------------------------------------------------------------- every model run takes (the CLI)

def _translating(key: str = KEY) -> Any:
    """A fake server answer: each text back, tokens intact, the caller's key quoted in it."""
    def answer(request: dict[str, Any]) -> str:
        texts = json.loads(request["messages"][-1]["content"])["texts"]
        return json.dumps({"translations": [f"{text} ({key})" for text in texts]})

    return answer


def _everything_written(tmp_path: Any) -> str:
    return "".join(p.read_bytes().decode("utf-8", "replace") for p in tmp_path.rglob("*") if p.is_file())


def test_translate_conversations_through_a_server_given_with_api_base(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Before: llm:MODEL had no --api-base (nor --api-key-env). Now: run's flags; the key the server echoes is
    nowhere: not in the output file, the store, stdout or stderr."""
    from promptgrid.matrix.cli import main
    from promptgrid.matrix.conversations import load_conversations

    monkeypatch.setenv("MY_SERVER_KEY", KEY)
    out, store = tmp_path / "de.jsonl", tmp_path / "t.sqlite3"
    with FakeServer.thread(FakeScript(), answer_fn=_translating()) as server:
        code = main(["translate", "--to", "de", "--backend", "llm:openai/m", "--api-base", server.url,
                     "--api-key-env", "MY_SERVER_KEY", "--dataset", "mini-mt:en", "--what", "instructions",
                     "--conversations-out", str(out), "--store", str(store)])
        sent = server.requests()
    printed = capsys.readouterr()
    assert code in (0, 1), printed.err  # 1: the checks find the "translations" still English
    assert sent and all(r["authorized"] and r["response_format"] == {"type": "json_object"} for r in sent)
    german = load_conversations(f"jsonl:{out}")
    assert len(german) == 24 and all(c.language == "de" for c in german)
    assert "[REDACTED]" in out.read_text(encoding="utf-8")
    assert KEY not in _everything_written(tmp_path) + printed.out + printed.err
    assert "segment(s) sent, 0 taken from the store" in printed.out


def test_a_key_the_server_refuses_is_input_and_leaves_no_store(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    from promptgrid.matrix.cli import main

    monkeypatch.setenv("MY_SERVER_KEY", KEY)
    store = tmp_path / "t.sqlite3"
    with FakeServer.thread(FakeScript(status=401, echo_auth_in_error=True)) as server:
        code = main(["translate", "--to", "de", "--backend", "llm:openai/m", "--api-base", server.url,
                     "--api-key-env", "MY_SERVER_KEY", "--what", "instructions", "--store", str(store)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "no usable API key" in err and KEY not in err
    assert not store.exists() and list(tmp_path.iterdir()) == []


def test_the_run_retry_policy_and_client_serve_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """llm:openai/m with api_base is sent by the run's own client (make_client), retried by the RetryPolicy."""
    from promptgrid.matrix.clients import make_client
    from promptgrid.matrix.clients._litellm import LiteLLMClient

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    notes: list[str] = []
    with FakeServer.thread(FakeScript(fail_first=1, fail_first_status=500), answer_fn=_translating()) as server:
        backend = LLMBackend("openai/m", api_base=server.url, clients=make_client, on_retry=notes.append,
                             sleep=lambda s: None)
        assert isinstance(backend._client, LiteLLMClient)
        out = backend.translate(["Hello ⟦1⟧"], "en", "de")
        backend.close()
        assert len(server.requests()) == 2
    assert out == ["Hello ⟦1⟧ ([REDACTED])"]
    assert len(notes) == 1 and "retrying in" in notes[0] and KEY not in notes[0]


def test_a_hanging_server_ends_within_the_timeout_through_the_client(monkeypatch: pytest.MonkeyPatch) -> None:
    from promptgrid.matrix.clients import make_client

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeServer.thread(FakeScript(p_hang=1.0, hang_s=60)) as server:
        backend = LLMBackend("openai/m", api_base=server.url, clients=make_client, timeout=1.0, max_attempts=2,
                             sleep=lambda s: None)
        started = time.monotonic()
        with pytest.raises(TranslationError, match=r"no answer within 1 s \(2 attempt\(s\)\)"):
            backend.translate(["Hello"], "en", "de")
        backend.close()
    assert time.monotonic() - started < 15
