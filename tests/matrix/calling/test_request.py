"""Prompt.request: what native and constrained prompts send beside the messages, and how it is hashed."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

import promptgrid as pg
from promptgrid.matrix.calling import (
    RequestRenderer,
    call_request,
    gbnf_grammar,
    json_schema,
    response_format,
    tool_schemas,
)
from promptgrid.matrix.running.plan import iter_jobs, job_key
from promptgrid.records import Prompt, messages_sha256
from promptgrid.templates import Renderer
from promptgrid.variants import CallMode, ReturnFormat, Variant, load_grid
from support.builders import FACTORIAL, fn, make_case


def test_prompt_mode_has_no_request() -> None:
    assert call_request(Variant(), [FACTORIAL]) is None


def test_native_request() -> None:
    request = call_request(Variant(call_mode=CallMode.NATIVE), [FACTORIAL])
    schemas = tool_schemas([FACTORIAL])
    assert request == {"call_mode": "native", "tools": list(schemas.tools), "tool_choice": "auto",
                       "tool_names": {"math_factorial": "math.factorial"}}
    json.dumps(request)  # plain JSON all the way down


def test_constrained_json_request_has_schema_response_format_and_grammar() -> None:
    request = call_request(Variant(return_format=ReturnFormat.JSON, call_mode=CallMode.CONSTRAINED), [FACTORIAL])
    assert request == {
        "call_mode": "constrained", "return_format": "json", "tool_call_tag": False,
        "json_schema": json_schema([FACTORIAL]),
        "response_format": response_format([FACTORIAL], provider="openai"),
        "grammar": gbnf_grammar([FACTORIAL], ReturnFormat.JSON, False),
        "unavailable": {},
    }


@pytest.mark.parametrize("fmt", [ReturnFormat.PYTHON, ReturnFormat.VERBOSE_XML, ReturnFormat.CONCISE_XML])
def test_constrained_other_formats_have_a_grammar_only(fmt: ReturnFormat) -> None:
    request = call_request(Variant(return_format=fmt, tool_call_tag=True, call_mode=CallMode.CONSTRAINED),
                           [FACTORIAL])
    assert request is not None
    assert request["grammar"] == gbnf_grammar([FACTORIAL], fmt, True)
    assert request["json_schema"] is None and request["response_format"] is None
    assert set(request["unavailable"]) == {"json_schema", "response_format"}


def test_constrained_json_with_tag_has_no_schema() -> None:
    request = call_request(Variant(return_format=ReturnFormat.JSON, tool_call_tag=True,
                                   call_mode=CallMode.CONSTRAINED), [FACTORIAL])
    assert request is not None and request["grammar"].count("<TOOLCALL>") == 1
    assert request["json_schema"] is None and "TOOLCALL" in request["unavailable"]["json_schema"]


def test_pieces_that_cannot_be_built_say_why() -> None:
    free_form = fn("f", ["x"], x="dict")  # OpenAI strict mode cannot write a free-form object
    request = call_request(Variant(return_format=ReturnFormat.JSON, call_mode=CallMode.CONSTRAINED), [free_form])
    assert request is not None and request["json_schema"] is not None and request["grammar"]
    assert request["response_format"] is None and request["unavailable"].keys() == {"response_format"}
    python_only = fn("from", ["x"], x="integer")  # a keyword: no Python call can name it
    request = call_request(Variant(call_mode=CallMode.CONSTRAINED), [python_only])
    assert request is not None and request["grammar"] is None and "grammar" in request["unavailable"]


def test_prompt_sha256_unchanged_in_prompt_mode_and_covers_the_request() -> None:
    messages = ({"role": "user", "content": "hi"},)
    plain = Prompt("v", "c", messages)
    assert plain.sha256 == messages_sha256(messages)
    constrained = replace(plain, request={"call_mode": "constrained", "grammar": "root ::= \"x\""})
    other = replace(plain, request={"call_mode": "constrained", "grammar": "root ::= \"y\""})
    assert len({plain.sha256, constrained.sha256, other.sha256}) == 3


def test_request_renderer_attaches_requests_and_passes_prompt_mode_through() -> None:
    inner, case = Renderer(), make_case()
    renderer = RequestRenderer(inner)
    base = Variant(return_format=ReturnFormat.JSON)
    prompt = renderer.render(base, case)
    assert prompt.request is None and prompt.sha256 == inner.render(base, case).sha256
    constrained = renderer.render(replace(base, call_mode=CallMode.CONSTRAINED), case)
    assert constrained.messages == prompt.messages and constrained.sha256 != prompt.sha256
    assert constrained.request == call_request(replace(base, call_mode=CallMode.CONSTRAINED), case.functions)
    native = renderer.render(Variant(call_mode=CallMode.NATIVE), case)
    assert native.request is not None and native.request["call_mode"] == "native"


def test_pg_render_tools_localized_de() -> None:
    cases = [c for c in pg.load_dataset("mini:de")][:3]
    native = Variant(call_mode=CallMode.NATIVE, description_language="query")
    english = Variant(call_mode=CallMode.NATIVE)
    for case, de, en in zip(cases, pg.render([native], cases), pg.render([english], cases), strict=True):
        assert de.request is not None and en.request is not None
        described = [t["function"]["description"] for t in de.request["tools"]]
        assert described != [t["function"]["description"] for t in en.request["tools"]]
        assert [t["function"]["description"] for t in en.request["tools"]] == [
            f["description"] for f in case.functions]
        params_de = json.dumps([t["function"]["parameters"] for t in de.request["tools"]], ensure_ascii=False)
        params_en = json.dumps([t["function"]["parameters"] for t in en.request["tools"]], ensure_ascii=False)
        assert params_de != params_en  # parameter descriptions travel translated too


def test_jobs_carry_the_request_and_keys_follow_the_prompt_hash() -> None:
    grid = load_grid("call_modes")
    case = make_case()
    renderer = RequestRenderer(Renderer())
    jobs = list(iter_jobs("m", {"temperature": 0}, grid.variants, [case], 1, renderer))
    assert len(jobs) == 9 and len({j.key for j in jobs}) == 9
    for job in jobs:
        prompt = renderer.render(job.variant, case)
        assert job.request == prompt.request and job.prompt_sha256 == prompt.sha256
        assert job.key == job_key("m", {"temperature": 0}, prompt.sha256, 0)
        assert (job.request is None) == (job.variant.call_mode is CallMode.PROMPT)
    prompt_jobs = [j for j in jobs if j.request is None]
    assert all(j.prompt_sha256 == messages_sha256(j.messages) for j in prompt_jobs)
