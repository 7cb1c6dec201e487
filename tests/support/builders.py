"""Record builders shared by all tests: one ``make_case`` and the presets built on it, variant lists.

Each preset fixes what its tests rely on (the user turn a stand-in answers, the
ids a test asserts on); everything else comes from ``make_case``'s defaults.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from promptgrid.records import Case
from promptgrid.variants import Variant, load_grid

FACTORIAL: dict[str, Any] = {
    "name": "math.factorial",
    "description": "Calculate the factorial of a given number.",
    "parameters": {
        "type": "dict",
        "properties": {
            "number": {"type": "integer", "description": "The number for which factorial needs to be calculated."},
            "mode": {"type": "string", "description": "How to compute.", "enum": ["fast", "exact"],
                     "default": "fast"},
        },
        "required": ["number"],
    },
}
"""The default function of ``make_case``: one required and one optional parameter, an enum and a default."""


def fn(name: str, required: list[str] | None = None, **props: Any) -> dict[str, Any]:
    """A BFCL function schema: ``fn("f", ["a"], a="integer", b={"type": "array", "items": {"type": "string"}})``."""
    properties = {k: (v if isinstance(v, dict) else {"type": v}) for k, v in props.items()}
    return {"name": name, "description": "", "parameters": {"type": "dict", "properties": properties,
                                                             "required": required or []}}


def make_case(
    functions: Sequence[Mapping[str, Any]] | None = None,
    *,
    ground_truth: Sequence[Mapping[str, Any]] = (),
    turns: Sequence[Mapping[str, str]] | None = None,
    category: str = "simple",
    language: str = "en",
    case_id: str = "case_1",
    group: str = "",
) -> Case:
    """A Case: by default one ``math.factorial`` function (a fresh copy), "What is 5 factorial?", no ground truth."""
    return Case(
        id=case_id,
        category=category,
        turns=tuple(turns or [{"role": "user", "content": "What is 5 factorial?"}]),
        functions=tuple([copy.deepcopy(FACTORIAL)] if functions is None else functions),
        ground_truth=tuple(ground_truth),
        language=language,
        group=group,
    )


def checked_case(category: str, functions: list[dict[str, Any]], ground_truth: list[dict[str, Any]],
                 case_id: str = "c1", language: str = "en") -> Case:
    """A Case for the checker and scoring tests: what is checked is given, the question is a stub."""
    return make_case(functions, ground_truth=ground_truth, turns=[{"role": "user", "content": "q"}],
                     category=category, language=language, case_id=case_id)


def numbered_case(i: int, language: str = "en") -> Case:
    """Case ``case_<i>``: "Please call func_<i> with x=<i>." (what ``support.running.answer_right`` answers)."""
    name = f"func_{i}"
    return make_case(
        [{"name": name, "description": f"Function number {i}.",
          "parameters": {"type": "dict", "properties": {"x": {"type": "integer", "description": "x"}},
                         "required": ["x"]}}],
        ground_truth=[{name: {"x": [i]}}],
        turns=[{"role": "user", "content": f"Please call {name} with x={i}."}],
        language=language, case_id=f"case_{i}", group=f"g{i}",
    )


def numbered_cases(n: int) -> list[Case]:
    """``numbered_case(0)`` to ``numbered_case(n - 1)``."""
    return [numbered_case(i) for i in range(n)]


def bfcl_variants(n: int | None = None) -> list[Variant]:
    """The bfcl_v4 grid's variants (the first ``n`` when given)."""
    variants = list(load_grid("bfcl_v4").variants)
    return variants if n is None else variants[:n]


def language_twins() -> list[Variant]:
    """Two variants that render identically for English cases (instruction language en vs query)."""
    base = Variant()
    return [base, replace(base, instruction_language="query")]
