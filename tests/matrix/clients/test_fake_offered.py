"""The fake models call only offered functions, in every doc format, return format and call mode (issue 21, Why 3)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import promptgrid as pg
from promptgrid.matrix.clients._fake import FakeClient
from promptgrid.matrix.scoring import FailureMode as F
from promptgrid.templates._docs import DocFlavour, render_function_docs
from promptgrid.variants import DocFormat, builtin_grids, load_grid
from support.fake_server import documented_function_names, first_function_name


def _cases() -> list[Any]:
    """mini:en's cases with the most functions, the fewest, and one of each category."""
    cases = pg.load_dataset("mini:en")
    picked = {max(cases, key=lambda c: len(c.functions)).id: None, min(cases, key=lambda c: len(c.functions)).id: None}
    for c in cases:
        picked.setdefault(c.category, c.id)
    ids = set(picked) | {v for v in picked.values() if v}
    return [c for c in cases if c.id in ids]


CASES = _cases()


def _answer(client: FakeClient, prompt: Any) -> Any:
    return asyncio.run(client.complete(prompt.messages, {}, request=prompt.request))


@pytest.mark.parametrize("grid", sorted(builtin_grids()))
def test_fake_auto_never_calls_a_function_it_was_not_offered(grid: str) -> None:
    variants = {v.id: v for v in load_grid(grid).variants}
    cases = {c.id: c for c in CASES}
    client = FakeClient("fake/auto")
    checked = 0
    for prompt in pg.render(list(variants.values()), CASES):
        variant, case = variants[prompt.variant_id], cases[prompt.case_id]
        offered = {f["name"] for f in case.functions}
        completion = _answer(client, prompt)
        if completion.tool_calls:
            names = prompt.request["tool_names"]
            called = {names.get(c["function"]["name"], c["function"]["name"]) for c in completion.tool_calls}
            assert called <= offered, (grid, variant.id, case.id, called)
        else:
            verdict = pg.score(completion.text, variant, case)
            assert verdict.failure_mode is not F.HALLUCINATED_FUNCTION, (grid, variant.id, case.id, completion.text)
            # in the format the prompt asks for (JSON docs in a ```json fence once made it answer JSON to a
            # python or XML instruction: 246 other_format answers on bfcl_v4_full x mini:en)
            assert verdict.failure_mode is not F.OTHER_FORMAT, (grid, variant.id, case.id, completion.text)
        checked += 1
    assert checked == len(variants) * len(CASES)


@pytest.mark.parametrize("doc_format", list(DocFormat))
@pytest.mark.parametrize("flavour", list(DocFlavour))
def test_documented_names_are_read_from_every_doc_format(doc_format: DocFormat, flavour: DocFlavour) -> None:
    functions = max(pg.load_dataset("mini:en"), key=lambda c: len(c.functions)).functions
    docs = render_function_docs(functions, doc_format, flavour)
    # The answer-format examples a prompt shows beside the docs name no offered function.
    examples = ('<functions><function name="func_name1"><params></params></function></functions>\n'
                '[{"function":"alarm.set","parameters":{}}]\nalarm.set(time="nine am")\n'
                '<functions><function name="alarm.set"><param name="time" type="string">x</param></function>'
                '</functions>')
    messages = [{"role": "system", "content": examples + "\n" + docs},
                {"role": "user", "content": "What's the weather? def not_offered(): ..."}]
    assert documented_function_names(messages) == [f["name"] for f in functions]
    assert first_function_name(messages) == functions[0]["name"]


def test_fake_prose_never_calls() -> None:
    client = FakeClient("fake/prose")
    variant = load_grid("demo").variants[0]
    prompt = next(iter(pg.render([variant], CASES[:1])))
    completion = _answer(client, prompt)
    assert completion.tool_calls is None
    assert pg.score(completion.text, variant, CASES[0]).failure_mode is F.PROSE_INSTEAD_OF_CALL
