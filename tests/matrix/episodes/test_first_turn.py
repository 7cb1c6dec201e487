"""First-turn prompts: promptgrid's rendering equals what bfcl-eval's prompting handler sends, byte for byte.

The reference is bfcl-eval's own code, run offline: its OpenAI completions
prompting handler (``OpenAICompletionsHandler``, the prompting path of
``BaseHandler.inference_multi_turn_prompting``) is constructed with a dummy
API key and no request is made; for each of the 200 ``multi_turn_base``
entries from ``bfcl_eval.utils.load_dataset_entry`` (docs of the involved
classes, language hint added), ``_pre_query_processing_prompting`` and
``add_first_turn_message_prompting(inference_data, question[0])`` build the
message list that ``_query_prompting`` would send on step 0 of turn 0.

bfcl-eval is installed with ``--no-deps``: ``model_handler/utils.py`` needs
stand-ins for tenacity and the tree-sitter parsers (``support.bfcl``), and
``base_handler.py`` imports ``overrides`` (only its ``final`` decorator).
Those files run here under private module names with the stand-ins (and the
private utils module as ``bfcl_eval.model_handler.utils``) in ``sys.modules``
only while they execute; afterwards ``sys.modules`` holds what it held before,
plus ordinary bfcl-eval modules imported on the way.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from collections.abc import Iterator

import pytest

from promptgrid.matrix.conversations import Conversation, first_turn_messages, load_conversations
from promptgrid.matrix.episodes._first_turn import DEFAULT_VARIANT, first_turn_case
from promptgrid.templates import Renderer
from promptgrid.variants import Variant, load_grid
from support.bfcl import bfcl_environment, prompting_handler_class


@pytest.fixture(scope="module")
def bfcl_first_requests() -> Iterator[dict[str, list[dict[str, str]]]]:
    """Entry id -> the messages bfcl-eval's prompting handler sends first, for the 200 multi_turn_base entries."""
    if importlib.util.find_spec("bfcl_eval") is None:
        pytest.skip("bfcl-eval is not installed (pip install --no-deps bfcl-eval)")
    pytest.importorskip("openai")
    with bfcl_environment():  # a temporary BFCL_PROJECT_ROOT and a dummy key: the client is built, never used
        from bfcl_eval.utils import load_dataset_entry

        handler = prompting_handler_class()("gpt-test", 0.001, "gpt-test", False)
        requests = {}
        for entry in load_dataset_entry("multi_turn_base"):
            inference_data = handler._pre_query_processing_prompting(entry)
            inference_data = handler.add_first_turn_message_prompting(inference_data, entry["question"][0])
            requests[entry["id"]] = inference_data["message"]
        yield requests


@pytest.fixture(scope="module")
def conversations() -> list[Conversation]:
    return load_conversations("bfcl:multi_turn_base")


def test_all_200_first_turn_prompts_are_byte_identical_to_bfcl_eval(
        conversations: list[Conversation], bfcl_first_requests: dict[str, list[dict[str, str]]]) -> None:
    assert len(conversations) == 200
    assert [c.id for c in conversations] == list(bfcl_first_requests)
    renderer = Renderer()
    different = []
    for conversation in conversations:
        ours = json.dumps(list(first_turn_messages(conversation, renderer=renderer)), ensure_ascii=False)
        theirs = json.dumps(bfcl_first_requests[conversation.id], ensure_ascii=False)
        if ours != theirs:
            different.append(conversation.id)
    assert different == [], f"{len(different)} of 200 first-turn prompts differ from bfcl-eval's: {different[:5]}"


def test_the_first_request_is_the_system_prompt_then_the_first_user_turn(conversations: list[Conversation]) -> None:
    conversation = conversations[0]
    messages = first_turn_messages(conversation)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1] == dict(conversation.turns[0][0])
    system = messages[0]["content"]
    assert system.startswith("You are an expert in composing functions.You are given a question")
    docs = json.loads(system[system.index("[\n"):])  # the JSON docs close the system prompt
    assert docs == [dict(doc) for doc in conversation.functions_at(0)]
    assert all(doc["description"].endswith(" Note that the provided function is in Python 3 syntax.") for doc in docs)


def test_the_default_variant_is_bfcl_v4_default_and_other_variants_render(conversations: list[Conversation]) -> None:
    assert DEFAULT_VARIANT == load_grid("bfcl_v4").base
    conversation = conversations[0]
    renderer = Renderer()
    default = first_turn_messages(conversation, renderer=renderer)
    assert first_turn_messages(conversation, DEFAULT_VARIANT, renderer=renderer) == default
    xml = first_turn_messages(conversation, Variant(doc_format="xml"), renderer=renderer)
    assert xml != default and xml[1:] == default[1:]
    assert first_turn_case(conversation).functions == conversation.functions_at(0)


def test_a_system_message_of_the_first_turn_follows_the_generated_prompt(conversations: list[Conversation]) -> None:
    """bfcl-eval joins a turn's own system message after its system prompt with a blank line."""
    conversation = conversations[0]
    own = {"role": "system", "content": "Answer briefly."}
    with_system = dataclasses.replace(conversation, turns=((own, *conversation.turns[0]), *conversation.turns[1:]))
    plain = first_turn_messages(conversation)
    messages = first_turn_messages(with_system)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == plain[0]["content"] + "\n\nAnswer briefly."
