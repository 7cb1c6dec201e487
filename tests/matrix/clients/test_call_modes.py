"""Call modes in every client: the exact request each sends, what each cannot send, what comes back."""

from __future__ import annotations

import asyncio
import json
import types
from pathlib import Path
from typing import Any

import pytest

from promptgrid.matrix.calling import call_request, format_calls
from promptgrid.matrix.clients import make_client
from promptgrid.matrix.clients._local import NATIVE_REASON, LocalClient
from promptgrid.matrix.scoring.parse import parse_response
from promptgrid.variants import ReturnFormat, Variant
from support.builders import make_case
from support.fake_server import REQUEST_PIECES, FakeServer

CASE = make_case()  # one function, math.factorial (offered as math_factorial)
MSGS = [{"role": "system", "content": "You call functions."}, {"role": "user", "content": "What is 5 factorial?"}]
NATIVE = call_request(Variant(call_mode="native"), CASE.functions)
JSON = call_request(Variant(return_format="json", call_mode="constrained"), CASE.functions)
PYTHON = call_request(Variant(call_mode="constrained"), CASE.functions)


def sent(client: Any, request: dict[str, Any]) -> Any:
    return asyncio.run(client.complete(MSGS, {"temperature": 0}, request=request))


def body_pieces(srv: FakeServer) -> dict[str, Any]:
    """The request pieces beyond the messages of the one request the server got."""
    (entry,) = srv.requests()
    return {k: entry[k] for k in REQUEST_PIECES if k in entry}


# ---------------------------------------------------------------------------------------------- litellm


@pytest.mark.parametrize("constraints", [None, "openai", "vllm", "llama.cpp"])
def test_litellm_native_sends_tools_and_reads_tool_calls(constraints: str | None) -> None:
    with FakeServer.thread() as srv:
        client = make_client("openai/served", api_base=srv.url, constraints=constraints)
        assert client.unsupported(NATIVE) is None
        c = sent(client, NATIVE)
        assert body_pieces(srv) == {"tools": NATIVE["tools"], "tool_choice": "auto"}
    assert c.tool_calls == ({"id": "call_0", "type": "function",
                             "function": {"name": "math_factorial", "arguments": "{}"}},)
    assert c.text == "" and c.finish_reason == "tool_calls"


def test_litellm_openai_constraint_sends_the_strict_response_format() -> None:
    with FakeServer.thread() as srv:
        client = make_client("openai/served", api_base=srv.url, constraints="openai")
        c = sent(client, JSON)
        assert body_pieces(srv) == {"response_format": JSON["response_format"]}
    assert JSON["response_format"]["json_schema"]["strict"] is True
    assert json.loads(c.text) == {"calls": [{"function": "math.factorial", "parameters": {}}]}


@pytest.mark.parametrize(("constraints", "body"), [
    ("vllm", lambda g: {"structured_outputs": {"grammar": g}}),
    ("llama.cpp", lambda g: {"grammar": g}),
])
@pytest.mark.parametrize("request_", [JSON, PYTHON], ids=["json", "python"])
def test_litellm_grammar_constraints_send_the_grammar(constraints: str, body: Any, request_: dict[str, Any]) -> None:
    with FakeServer.thread() as srv:
        client = make_client("openai/served", api_base=srv.url, constraints=constraints)
        assert client.unsupported(request_) is None
        sent(client, request_)
        assert body_pieces(srv) == body(request_["grammar"])


def test_litellm_decides_unsupported_before_sending() -> None:
    server = make_client("openai/served", api_base="http://127.0.0.1:9/v1", constraints="openai")
    assert "python return format is not JSON" in server.unsupported(PYTHON)
    assert "constraints: none" in make_client("openai/served", api_base="http://127.0.0.1:9/v1",
                                              constraints="none").unsupported(JSON)
    # No api_base: litellm's capability lists decide.
    unknown = make_client("openai/no-such-model-xyz")
    assert "supporting native function calling" in unknown.unsupported(NATIVE)
    assert "constraints: vllm or llama.cpp" in unknown.unsupported(JSON)
    known = make_client("openai/gpt-4o-mini")
    assert known.unsupported(NATIVE) is None and known.unsupported(JSON) is None
    assert "python return format is not JSON" in known.unsupported(PYTHON)


def test_litellm_prompt_mode_sends_no_pieces() -> None:
    with FakeServer.thread() as srv:
        asyncio.run(make_client("openai/served", api_base=srv.url).complete(MSGS, {"temperature": 0}))
        assert body_pieces(srv) == {}


# ---------------------------------------------------------------------------------------------- fake


@pytest.mark.parametrize("fmt", list(ReturnFormat))
def test_fake_client_answers_in_the_constrained_format(fmt: ReturnFormat) -> None:
    request = call_request(Variant(return_format=fmt, call_mode="constrained"), CASE.functions)
    messages = [{"role": "system", "content": 'Functions: [{"name": "math.factorial"}]'}, MSGS[1]]
    client = make_client("fake/auto")
    assert client.unsupported(request) is None
    c = asyncio.run(client.complete(messages, {}, request=request))
    assert c.text == format_calls([{"math.factorial": {}}], fmt, False)
    assert parse_response(c.text, fmt, False).calls == ({"math.factorial": {}},)


def test_fake_client_answers_native_with_a_tool_call() -> None:
    c = asyncio.run(make_client("fake/auto").complete(MSGS, {}, request=NATIVE))
    assert c.tool_calls[0]["function"] == {"name": "math_factorial", "arguments": "{}"}
    prose = asyncio.run(make_client("fake/prose").complete(MSGS, {}, request=NATIVE))
    assert prose.tool_calls is None and prose.text


# ---------------------------------------------------------------------------------------------- local


class _StubGrammar:
    compiled: list[str] = []

    def __init__(self, text: str) -> None:
        self.text = text

    @classmethod
    def from_string(cls, text: str, verbose: bool = True) -> _StubGrammar:
        cls.compiled.append(text)
        return cls(text)


class _StubLlama:
    calls: list[dict[str, Any]] = []

    def __init__(self, **kwargs: Any) -> None:
        pass

    def reset(self) -> None:
        pass

    def token_eos(self) -> int:
        return 0

    def create_chat_completion(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        return {"choices": [{"message": {"content": "[math.factorial(number=5)]"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5}}


def test_local_client_sends_the_grammar_and_refuses_native(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from promptgrid.matrix.clients import _local

    stub = types.SimpleNamespace(Llama=_StubLlama, LlamaGrammar=_StubGrammar, LogitsProcessorList=list)
    monkeypatch.setattr(_local, "_import_llama", lambda: stub)
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"")
    client = LocalClient(f"local/{gguf}")
    assert client.unsupported(NATIVE) == NATIVE_REASON
    for request in (PYTHON, JSON, PYTHON):
        assert client.unsupported(request) is None
        c = asyncio.run(client.complete(MSGS, {"temperature": 0.0, "max_tokens": 64}, request=request))
        assert c.text == "[math.factorial(number=5)]"
    kwargs = _StubLlama.calls[-3:]
    assert [k["grammar"].text for k in kwargs] == [PYTHON["grammar"], JSON["grammar"], PYTHON["grammar"]]
    assert all(k["messages"] == MSGS and k["temperature"] == 0.0 and k["max_tokens"] == 64 for k in kwargs)
    assert _StubGrammar.compiled.count(PYTHON["grammar"]) == 1  # compiled once per grammar text
    asyncio.run(client.complete(MSGS, {"temperature": 0.0}))
    assert "grammar" not in _StubLlama.calls[-1]  # prompt mode: no constraint
