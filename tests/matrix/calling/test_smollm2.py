"""SmolLM2-135M constrained by the grammar: every answer parses as calls (slow; needs the local model).

Five English ``mini`` cases per return format (the tag alternating), rendered
with the bfcl_v4 template, answered at temperature 0 under
``gbnf_grammar``. Without the grammar this model answers in prose (0% parse);
with it every answer must parse, with our parser, as >= 1 typed call of the
case's functions. The same for llama-cpp-python's JSON-schema path
(``response_format`` with ``json_schema``'s answer schema). One model
instance, two threads (the machine is shared).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from promptgrid.matrix.calling import gbnf_grammar, response_format
from promptgrid.matrix.datasets import load_dataset
from promptgrid.templates import render
from promptgrid.variants import ReturnFormat, load_grid

pytestmark = pytest.mark.slow

N_CASES = 5


@pytest.fixture(scope="module")
def smollm2(llama: Any) -> Iterator[Any]:
    import llama_cpp

    from promptgrid.matrix.clients._local import resolve_local_model

    model = llama_cpp.Llama(str(resolve_local_model("local/smollm2-135m")), n_ctx=4096, n_threads=2,
                            verbose=False, seed=0)
    yield model
    model.close()


@pytest.mark.parametrize("fmt", list(ReturnFormat))
def test_constrained_smollm2_answers_parse_as_calls(smollm2: Any, helpers: Any, fmt: ReturnFormat) -> None:
    from llama_cpp import LlamaGrammar

    variants = list(load_grid("bfcl_v4").variants)
    for i, case in enumerate(list(load_dataset("mini:en").cases)[:N_CASES]):
        tag = i % 2 == 1
        variant = next(v for v in variants if v.return_format == fmt and v.tool_call_tag == tag)
        grammar = LlamaGrammar.from_string(gbnf_grammar(case.functions, fmt, tag), verbose=False)
        out = smollm2.create_chat_completion([dict(m) for m in render(variant, case).messages], grammar=grammar,
                                             temperature=0, max_tokens=1024)
        choice = out["choices"][0]
        assert choice["finish_reason"] == "stop", (case.id, choice["message"]["content"][:300])
        helpers.assert_conforms(choice["message"]["content"], list(case.functions), fmt, tag)


def test_llama_cpp_response_format_schema_gives_json_calls(smollm2: Any, helpers: Any) -> None:
    """llama-cpp-python's ``response_format={"type": "json_object", "schema": ...}`` with our answer schema."""
    variant = next(v for v in load_grid("bfcl_v4").variants
                   if v.return_format == ReturnFormat.JSON and not v.tool_call_tag)
    for case in list(load_dataset("mini:en").cases)[:N_CASES]:
        out = smollm2.create_chat_completion([dict(m) for m in render(variant, case).messages],
                                             response_format=response_format(case.functions, provider="llama_cpp"),
                                             temperature=0, max_tokens=1024)
        choice = out["choices"][0]
        assert choice["finish_reason"] == "stop", (case.id, choice["message"]["content"][:300])
        helpers.assert_conforms(choice["message"]["content"], list(case.functions), ReturnFormat.JSON, False,
                                int_floats=True)
