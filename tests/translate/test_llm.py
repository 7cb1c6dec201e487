"""LLM backend through litellm's ``mock_response`` (no network, no keys)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

litellm = pytest.importorskip("litellm")

# litellm's response types trigger a pydantic UserWarning on first use; not ours.

from promptgrid.translate import TranslationError, Unit, UnitKind, translate_units  # noqa: E402
from promptgrid.translate._llm import LLMBackend, parse_translations  # noqa: E402


def mock_llm(answer: Callable[[list[str]], Any]) -> tuple[Callable[..., Any], list[list[str]]]:
    """A completion function that answers through litellm's mock_response and records the texts asked."""
    asked: list[list[str]] = []

    def completion(**kwargs: Any) -> Any:
        texts = json.loads(kwargs["messages"][1]["content"])["texts"]
        asked.append(texts)
        content = answer(texts)
        return litellm.completion(**kwargs, mock_response=content if isinstance(content, str)
                                  else json.dumps(content, ensure_ascii=False))

    return completion, asked


def german(texts: list[str]) -> dict[str, list[str]]:
    return {"translations": [f"[de] {t}" for t in texts]}


def test_translates_a_batch_and_keeps_tokens() -> None:
    completion, asked = mock_llm(german)
    backend = LLMBackend("openai/gpt-4o-mini", completion=completion)
    assert backend.name == "llm:openai/gpt-4o-mini"
    out = backend.translate(["Use ⟦1⟧ now.", "Hello."], "en", "de")
    assert out == ["[de] Use ⟦1⟧ now.", "[de] Hello."]
    assert asked == [["Use ⟦1⟧ now.", "Hello."]]


def test_the_instruction_is_strict() -> None:
    seen: list[list[dict[str, str]]] = []

    def completion(**kwargs: Any) -> Any:
        seen.append(kwargs["messages"])
        assert kwargs["response_format"] == {"type": "json_object"}
        return litellm.completion(**kwargs, mock_response='{"translations": ["x"]}')

    LLMBackend("openai/m", completion=completion).translate(["a ⟦1⟧"], "en", "ja")
    system = seen[0][0]["content"]
    assert "Japanese" in system and "⟦1⟧" in system and "exactly 1 strings" in system
    assert "Translate only" in system


def test_damaged_tokens_are_asked_again_once() -> None:
    answers = iter([
        {"translations": ["kaputt", "[de] B ⟦1⟧"]},   # first text lost its token
        {"translations": ["[de] A ⟦1⟧"]},              # the retry fixes it
    ])
    completion, asked = mock_llm(lambda texts: next(answers))
    out = LLMBackend("openai/m", completion=completion).translate(["A ⟦1⟧", "B ⟦1⟧"], "en", "de")
    assert out == ["[de] A ⟦1⟧", "[de] B ⟦1⟧"]
    assert asked == [["A ⟦1⟧", "B ⟦1⟧"], ["A ⟦1⟧"]]


def test_still_damaged_after_the_retry_is_recorded_for_that_unit(store: Any) -> None:
    completion, asked = mock_llm(lambda texts: {"translations": ["Benutze das Format." for _ in texts]})
    backend = LLMBackend("openai/m", completion=completion)
    report = translate_units([Unit("c.k", UnitKind.INSTRUCTIONS, "Use the {output_format} format.")],
                             ["de"], backend, store)
    (result,) = report.results
    assert not result.ok
    assert "placeholder_missing" in result.problems
    assert "is missing" in " ".join(result.details["tokens"])
    assert len(asked) == 2
    stored = store.get("Use the {output_format} format.", "de", "llm:openai/m")
    assert stored is not None and not stored.ok  # kept, flagged, never used
    assert store.lookup("Use the {output_format} format.", "de") is None


@pytest.mark.parametrize(
    "bad",
    ["not json", '["a list"]', '{"translations": ["one", "two"]}', '{"translations": [1]}',
     '{"translations": ["x"], "note": "extra"}', ""],
)
def test_contract_violations_are_retried_once_then_an_error(bad: str) -> None:
    completion, asked = mock_llm(lambda texts: bad or " ")
    with pytest.raises(TranslationError, match="after 2 attempts"):
        LLMBackend("openai/m", completion=completion).translate(["Hello"], "en", "de")
    assert len(asked) == 2


def test_a_fenced_json_answer_is_accepted() -> None:
    assert parse_translations('```json\n{"translations": ["a"]}\n```', 1) == ["a"]


def test_provider_errors_become_translation_errors() -> None:
    calls: list[int] = []
    delays: list[float] = []

    def completion(**kwargs: Any) -> Any:
        calls.append(1)
        return litellm.completion(**kwargs, mock_response="litellm.RateLimitError")

    backend = LLMBackend("openai/m", completion=completion, max_attempts=3, sleep=delays.append)
    with pytest.raises(TranslationError, match="rate limited"):
        backend.translate(["Hello"], "en", "de")
    assert len(calls) == 3 and len(delays) == 2 and delays[1] > delays[0] * 1.0 - 1e-9


def test_each_unique_string_is_sent_once_across_two_runs(store: Any, accept_all: Any) -> None:
    completion, asked = mock_llm(german)
    backend = LLMBackend("openai/gpt-4o-mini", completion=completion, batch_size=2)
    units = [
        Unit("classic.persona", UnitKind.INSTRUCTIONS, "You are an expert in composing functions."),
        Unit("mine.persona", UnitKind.INSTRUCTIONS, "You are an expert in composing functions."),
        Unit("f.description", UnitKind.DESCRIPTIONS, "Get the weather.\nUse `city_name`.", ("f",)),
        Unit("g.description", UnitKind.DESCRIPTIONS, "Get the weather.", ("g",)),
    ]
    first = translate_units(units, ["de", "ja"], backend, store, checker=accept_all)
    second = translate_units(units, ["de", "ja"], backend, store, checker=accept_all)
    flat = [t for batch in asked for t in batch]
    # 3 unique segments ("Get the weather." is shared by two units) x 2 languages
    assert sorted(flat) == sorted(["You are an expert in composing functions.", "Get the weather.",
                                   "Use ⟦1⟧."] * 2)
    assert len(first.sent) == 6 and second.sent == ()
    assert {r.status for r in first.results} == {"new"}
    assert {r.status for r in second.results} == {"cached"}
    f_de = next(r for r in second.results if r.unit.key == "f.description" and r.target == "de")
    assert f_de.text == "[de] Get the weather.\n[de] Use `city_name`."
