"""The shared provider layer: retry policy, error mapping, lazy litellm."""

from __future__ import annotations

import random
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from promptgrid.providers import (
    CallError,
    ErrorKind,
    FatalError,
    RetryableError,
    RetryPolicy,
    call_error,
    convert_exception,
    one_line,
)


@given(attempt=st.integers(1, 30), base=st.floats(0.001, 5), cap=st.floats(0.01, 120),
       retry_after=st.none() | st.floats(0, 60), seed=st.integers())
def test_backoff_bounds(attempt: int, base: float, cap: float, retry_after: float | None, seed: int) -> None:
    policy = RetryPolicy(base=base, cap=cap)
    d = policy.delay(attempt, retry_after, rand=random.Random(seed).random)
    assert d >= 0
    if retry_after is not None:
        assert retry_after <= d <= max(min(cap, base * 2 ** (attempt - 1)), retry_after + 0.1 * retry_after + 1.05)
    else:
        assert d <= min(cap, base * 2 ** (attempt - 1))


@given(attempt=st.integers(1, 30), seed=st.integers())
def test_equal_jitter_waits_at_least_half_the_window(attempt: int, seed: int) -> None:
    policy = RetryPolicy(base=0.5, cap=20.0, jitter=0.5)
    window = min(20.0, 0.5 * 2 ** (attempt - 1))
    assert window / 2 <= policy.delay(attempt, rand=random.Random(seed).random) <= window


def test_delay_is_reproducible_with_a_seeded_source() -> None:
    policy = RetryPolicy(base=1.0, cap=60.0)
    first = [policy.delay(n, rand=random.Random(7).random) for n in range(1, 6)]
    assert first == [policy.delay(n, rand=random.Random(7).random) for n in range(1, 6)]
    assert RetryPolicy(jitter=0.5).delay(1, rand=lambda: 1.0) == 1.0  # the top of the first window


def test_retry_after_is_capped() -> None:
    policy = RetryPolicy(base=0.01, cap=0.01, retry_after_cap=5.0)
    assert policy.delay(1, 86400.0, rand=lambda: 0.5) == 5.0  # a day's Retry-After waits the cap
    assert 3.0 <= policy.delay(1, 3.0, rand=lambda: 0.5) <= 3.4  # below the cap: honoured, plus jitter
    assert RetryPolicy().retry_after_cap == 120.0
    with pytest.raises(ValueError, match="retry_after_cap"):
        RetryPolicy(retry_after_cap=-1)


def test_attempts_are_bounded() -> None:
    policy = RetryPolicy(max_attempts=3)
    assert [policy.allows(n) for n in (1, 2, 3)] == [True, True, False]
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="jitter"):
        RetryPolicy(jitter=1.5)


def test_call_error_picks_the_subclass() -> None:
    assert isinstance(call_error(ErrorKind.RATE_LIMIT, "slow down"), RetryableError)
    err = call_error(ErrorKind.AUTH, "no key", status=401)
    assert isinstance(err, FatalError) and not err.retryable and str(err) == "auth: no key"


def test_importing_providers_does_not_import_litellm() -> None:
    code = "import sys, promptgrid.providers; print('litellm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


litellm = pytest.importorskip("litellm")


def _exc(name: str, message: str = "boom", **kw: Any) -> BaseException:
    cls = getattr(litellm.exceptions, name)
    return cls(message=message, llm_provider="openai", model="gpt-x", **kw)


@pytest.mark.parametrize(("exc", "kind"), [
    (lambda: _exc("RateLimitError"), ErrorKind.RATE_LIMIT),
    (lambda: _exc("Timeout"), ErrorKind.TIMEOUT),
    (lambda: _exc("AuthenticationError"), ErrorKind.AUTH),
    (lambda: _exc("NotFoundError"), ErrorKind.NOT_FOUND),
    (lambda: _exc("ContextWindowExceededError"), ErrorKind.CONTEXT_LENGTH),
    (lambda: _exc("InternalServerError"), ErrorKind.SERVER),
    (lambda: _exc("InternalServerError", "Unterminated string in JSON"), ErrorKind.MALFORMED),
    (lambda: _exc("InternalServerError", "OPENAI_API_KEY: missing credentials"), ErrorKind.AUTH),
    (lambda: _exc("APIConnectionError"), ErrorKind.CONNECTION),
    (lambda: _exc("BadRequestError"), ErrorKind.BAD_REQUEST),
    (lambda: _exc("ServiceUnavailableError"), ErrorKind.SERVER),
    (lambda: _exc("APIConnectionError", "Missing Gemini API key. Set the GEMINI_API_KEY"), ErrorKind.AUTH),
    (lambda: _exc("AuthenticationError", "Missing Anthropic API Key"), ErrorKind.AUTH),
    (lambda: ConnectionResetError("reset"), ErrorKind.CONNECTION),
    (lambda: KeyError("x"), ErrorKind.UNKNOWN),
])
def test_provider_exceptions_map_once(exc: Any, kind: ErrorKind) -> None:
    err = convert_exception(exc())
    assert isinstance(err, CallError) and err.kind is kind
    assert isinstance(err, RetryableError) is kind.retryable


def test_retry_after_header_and_redaction() -> None:
    class Limited(Exception):
        headers = {"retry-after": "2.5"}
        status_code = 429

    err = convert_exception(Limited("key sk-secret was rate limited"), lambda s: s.replace("sk-secret", "***"))
    assert err.kind is ErrorKind.RATE_LIMIT and err.status == 429 and err.retry_after == 2.5
    assert "sk-secret" not in err.message and "***" in err.message


def test_credential_variables_and_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from promptgrid.providers import credential_hint, credential_vars, missing_credentials

    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "AWS_ACCESS_KEY_ID",
                 "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK", "AWS_WEB_IDENTITY_TOKEN_FILE",
                 "MY_KEY", "MISTRAL_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert credential_vars("openai/gpt-4o-mini") == ("OPENAI_API_KEY",)
    assert credential_vars("openai/x", "MY_KEY") == ("MY_KEY",)
    assert credential_vars("mistral/mistral-small") == ("MISTRAL_API_KEY",)  # from litellm's validate_environment
    assert missing_credentials("openai/gpt-4o-mini") == ("OPENAI_API_KEY",)
    assert missing_credentials("openai/x", api_base="http://127.0.0.1:8000/v1") == ()  # a server of your own
    assert missing_credentials("openai/x", api_base="http://h/v1", api_key_env="MY_KEY") == ("MY_KEY",)
    assert missing_credentials("anthropic/claude-3-5-sonnet-20240620") == ("ANTHROPIC_API_KEY",)
    bedrock = "bedrock/anthropic.claude-3-haiku-20240307-v1:0"
    assert missing_credentials(bedrock) == ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_PROFILE", "work")
    assert missing_credentials(bedrock) == ()  # credentials from a profile
    assert credential_hint("openai/gpt-4o-mini") == "OPENAI_API_KEY not set: export it (export OPENAI_API_KEY=...) " \
        "and run again."
    monkeypatch.setenv("OPENAI_API_KEY", "sk-whatever-1234")
    assert missing_credentials("openai/gpt-4o-mini") == ()
    assert "OPENAI_API_KEY set but refused" in credential_hint("openai/gpt-4o-mini")


def test_client_auth_error_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from promptgrid.matrix.clients._litellm import LiteLLMClient
    from support.fake_server import FakeScript, FakeServer

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeServer.thread(FakeScript(status=401)) as srv:
        client = LiteLLMClient("openai/mine", api_base=srv.url)
        with pytest.raises(FatalError) as info:
            asyncio.run(client.complete([{"role": "user", "content": "hi"}], {}))
    assert info.value.kind is ErrorKind.AUTH
    assert "the server at api_base wants a key: export OPENAI_API_KEY=..." in info.value.message


def test_malformed_answers_are_retried_once_whatever_max_attempts() -> None:
    policy = RetryPolicy(max_attempts=6)
    assert policy.allows(1, ErrorKind.MALFORMED) and not policy.allows(2, ErrorKind.MALFORMED)
    assert policy.allows(5, ErrorKind.SERVER) and not policy.allows(6, ErrorKind.SERVER)
    assert not RetryPolicy(max_attempts=1).allows(1, ErrorKind.MALFORMED)
    with pytest.raises(ValueError, match="timeout"):
        RetryPolicy(timeout=0)


_TRACEBACK_TEXT = (
    "OpenAIException - Invalid response object Traceback (most recent call last):\n"
    '  File "/venv/lib/python3.11/site-packages/litellm/litellm_core_utils/convert_dict_to_response.py", line 870, '
    "in convert_to_model_response_object\n    message = Message(\n"
    "pydantic_core._pydantic_core.ValidationError: 1 validation error for Message\ncontent\n"
    "  Input should be a valid string [type=string_type, input_value=12345, input_type=int]\n\n\n"
    "received_args={'response_object': {'choices': [{'message': {'content': 12345}}]}}")


def test_one_line_keeps_the_exception_of_a_traceback_and_drops_paths() -> None:
    line = one_line(_TRACEBACK_TEXT)
    assert "\n" not in line and "site-packages" not in line and ".py" not in line and "Traceback" not in line
    assert line == ("OpenAIException - Invalid response object (ValidationError: 1 validation error for Message "
                    "(field content))")
    cleaned = one_line('see File "/a/b/c.py", line 3 and C:\\x\\y.py:12 here')
    assert cleaned == 'see File "<file>", line 3 and <file> here'
    long = one_line("x " * 300_000)
    assert len(long) <= 500 and long.endswith("...")


def test_an_answer_litellm_cannot_read_is_malformed_in_one_line() -> None:
    err = convert_exception(_exc("InternalServerError", _TRACEBACK_TEXT))
    assert err.kind is ErrorKind.MALFORMED and isinstance(err, RetryableError)
    assert err.message == ("malformed answer: the server's response could not be read as a chat completion "
                           "(ValidationError: 1 validation error for Message (field content))")
    assert convert_exception(_exc("InternalServerError", "The server had an error.")).kind is ErrorKind.SERVER
