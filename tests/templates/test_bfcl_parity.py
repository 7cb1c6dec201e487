"""Byte parity with bfcl-eval itself: the bfcl_v4 grid x format_sensitivity (26 x 200 = 5200 prompts).

The reference messages come from bfcl-eval's own functions: its data loading
(``load_dataset_entry('format_sensitivity')``, which applies its function-doc
pre-processing) and ``system_prompt_pre_processing_chat_model`` (which calls
``formulate_system_prompt``). Nothing is compared against stored hashes.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from promptgrid.matrix.datasets._bfcl import load_bfcl
from promptgrid.templates import Renderer, render_function_docs
from promptgrid.variants import load_grid


@pytest.fixture(scope="module")
def reference(bfcl: Any) -> list[tuple[str, str, list[dict[str, str]]]]:
    """(config, entry id, messages bfcl-eval sends) for every format-sensitivity prompt, in bfcl-eval's order."""
    out = []
    for entry in bfcl.utils.load_dataset_entry("format_sensitivity"):
        _, config, entry_id = entry["id"].split(":")
        messages = bfcl.model_utils.system_prompt_pre_processing_chat_model(
            copy.deepcopy(entry["question"][0]), entry["function"], entry["id"]
        )
        out.append((config, entry_id, messages))
    return out


def test_grid_is_bfcl_configs_in_order(bfcl: Any) -> None:
    grid = load_grid("bfcl_v4")
    assert [v.id for v in grid.variants] == bfcl.utils.get_all_format_sensitivity_configs()


def test_cases_are_bfcl_entries_in_order(reference: list[tuple[str, str, Any]]) -> None:
    cases = load_bfcl("format_sensitivity")
    assert len(cases) == 200
    assert [c.id for c in cases] == [entry_id for _, entry_id, _ in reference[::26]]


def test_all_5200_prompts_byte_identical(reference: list[tuple[str, str, list[dict[str, str]]]]) -> None:
    grid = load_grid("bfcl_v4")
    variants = {v.id: v for v in grid.variants}
    cases = {c.id: c for c in load_bfcl("format_sensitivity")}
    renderer = Renderer()
    assert len(reference) == 5200
    mismatches = []
    with_system = 0
    for config, entry_id, expected in reference:
        prompt = renderer.render(variants[config], cases[entry_id])
        assert prompt.variant_id == config
        got = [dict(m) for m in prompt.messages]
        with_system += got[0]["content"].endswith(cases[entry_id].turns[0]["content"]) and \
            cases[entry_id].turns[0]["role"] == "system"
        if got != expected:
            mismatches.append((config, entry_id))
    assert not mismatches, f"{len(mismatches)} of 5200 prompts differ, first: {mismatches[:3]}"
    assert with_system == 7 * 26  # entries that carry their own system message were exercised


@pytest.mark.parametrize("category", ["simple_python", "live_multiple", "live_parallel_multiple"])
def test_doc_renderers_match_bfcl_on_whole_categories(bfcl: Any, category: str) -> None:
    entries = bfcl.utils.load_dataset_entry(category)
    for entry in entries:
        for doc_format in ("json", "python", "xml"):
            expected = bfcl.model_utils.format_function_doc(copy.deepcopy(entry["function"]), doc_format)
            assert render_function_docs(entry["function"], doc_format, "bfcl") == expected, (entry["id"], doc_format)


@pytest.mark.parametrize("category", ["simple_python", "multiple", "live_simple", "irrelevance"])
def test_loader_matches_bfcl_entries(bfcl: Any, category: str) -> None:
    expected = bfcl.utils.load_dataset_entry(category)
    cases = load_bfcl(category)
    assert [c.id for c in cases] == [e["id"] for e in expected]
    for case, entry in zip(cases, expected, strict=True):
        assert list(case.functions) == entry["function"]
        assert [dict(t) for t in case.turns] == entry["question"][0]
    if category != "irrelevance":
        answers = {a["id"]: a["ground_truth"] for a in bfcl.utils.load_ground_truth_entry(category)}
        assert all(list(c.ground_truth) == answers[c.id] for c in cases)
