"""The litellm client: mock_response, and every fault of the fake server mapped to our errors."""

from __future__ import annotations

import asyncio

import pytest

from promptgrid.matrix.clients import (
    REDACTED,
    CallError,
    Completion,
    ErrorKind,
    FatalError,
    ModelClient,
    Redactor,
    RetryableError,
    make_client,
)
from support.fake_server import FakeScript, FakeServer

MSGS = [{"role": "system", "content": "Here is a list of functions in JSON format.\n[{\"name\": \"get_time\"}]"},
        {"role": "user", "content": "What time is it?"}]


def complete(client: ModelClient, **params):
    return asyncio.run(client.complete(MSGS, {"temperature": 0, "max_tokens": 32, **params}))


def test_mock_response_is_a_completion() -> None:
    client = make_client("openai/gpt-4o-mini", api_key_env=None)
    assert isinstance(client, ModelClient)
    c = complete(client, mock_response="[get_time()]", api_key="sk-test-not-real")
    assert isinstance(c, Completion)
    assert c.text == "[get_time()]" and c.finish_reason == "stop"
    assert c.input_tokens and c.output_tokens
    assert c.cost_usd is not None and c.cost_usd > 0  # priced from litellm's bundled price map


def test_mock_rate_limit_is_retryable() -> None:
    client = make_client("openai/gpt-4o-mini")
    with pytest.raises(RetryableError) as info:
        complete(client, mock_response="litellm.RateLimitError", api_key="sk-test-not-real")
    assert info.value.kind is ErrorKind.RATE_LIMIT and info.value.retryable


def test_unknown_model_price_is_none_not_a_crash() -> None:
    client = make_client("openai/no-such-model-xyz")
    assert client.price(1000, 1000) is None
    c = complete(client, mock_response="hi", api_key="sk-test-not-real")
    assert c.cost_usd is None
    assert make_client("openai/gpt-4o-mini").price(1000, 1000) > 0


@pytest.mark.parametrize(
    ("script", "kind", "retryable", "retry_after"),
    [
        (FakeScript(p_rate_limit=1.0, retry_after_s=0.5), ErrorKind.RATE_LIMIT, True, 0.5),
        (FakeScript(p_rate_limit=1.0, retry_after_s=None), ErrorKind.RATE_LIMIT, True, None),
        (FakeScript(p_server_error=1.0), ErrorKind.SERVER, True, None),
        (FakeScript(p_malformed=1.0), ErrorKind.MALFORMED, True, None),
        (FakeScript(status=401), ErrorKind.AUTH, False, None),
        (FakeScript(status=404), ErrorKind.NOT_FOUND, False, None),
        (FakeScript(status=400), ErrorKind.BAD_REQUEST, False, None),
    ],
)
def test_fake_server_faults_map_once(script: FakeScript, kind: ErrorKind, retryable: bool,
                                     retry_after: float | None) -> None:
    with FakeServer.thread(script) as srv:
        client = make_client("openai/fake-model", api_base=srv.url)
        with pytest.raises(CallError) as info:
            complete(client)
        assert len(srv.requests()) == 1  # the SDK's own retries are off: we retry, once, in the runner
    err = info.value
    assert err.kind is kind
    assert isinstance(err, RetryableError if retryable else FatalError)
    assert err.retry_after == retry_after


def test_hang_times_out() -> None:
    with FakeServer.thread(FakeScript(p_hang=1.0)) as srv:
        client = make_client("openai/fake-model", api_base=srv.url)
        with pytest.raises(RetryableError) as info:
            complete(client, timeout=0.3)
    assert info.value.kind is ErrorKind.TIMEOUT


def test_key_echoed_in_error_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVER_KEY", "sk-planted-xyz-123")
    with FakeServer.thread(FakeScript(status=401, echo_auth_in_error=True)) as srv:
        client = make_client("openai/fake-model", api_base=srv.url, api_key_env="MY_SERVER_KEY",
                             redactor=Redactor())
        with pytest.raises(FatalError) as info:
            complete(client)
    assert "sk-planted-xyz-123" not in info.value.message and "planted-xyz" not in str(info.value)
    assert REDACTED in info.value.message


def test_answer_in_requested_format() -> None:
    with FakeServer.thread(FakeScript()) as srv:
        c = complete(make_client("openai/fake-model", api_base=srv.url))
    assert c.text == "[get_time()]" and c.model == "fake-model"


def test_missing_local_dependency_has_install_hint(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    import builtins

    from promptgrid.errors import MissingDependencyError

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    real_import = builtins.__import__

    def no_llama(name, *args, **kwargs):
        if name == "llama_cpp":
            raise ImportError("no llama")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_llama)
    with pytest.raises(MissingDependencyError, match="install_local.sh"):
        make_client(f"local/{gguf}")


def test_fake_client_needs_no_network() -> None:
    c = complete(make_client("fake/auto"))
    assert c.text == "[get_time()]" and c.cost_usd == 0.0
