"""The LLM translation backend against the fake OpenAI-compatible server on 127.0.0.1: the run's redactor
and retry/timeout policy (a key the server echoes never reaches the message or the store; a hanging server
ends within the timeout with a clear error)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from promptgrid.errors import TranslationError
from promptgrid.matrix.testing.fake_server import FakeScript, FakeServer
from promptgrid.translate._llm import LLMBackend

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
