"""Builders shared by the runner tests: cases, a stand-in scorer, a prepared run."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from promptgrid.matrix.running.config import ModelSpec, RunConfig, model_params
from promptgrid.matrix.cli.run import Prepared
from promptgrid.records import Case
from promptgrid.variants import Variant, load_grid


def make_case(i: int, language: str = "en") -> Case:
    name = f"func_{i}"
    return Case(
        id=f"case_{i}", category="simple", language=language, group=f"g{i}",
        turns=({"role": "user", "content": f"Please call {name} with x={i}."},),
        functions=({"name": name, "description": f"Function number {i}.",
                    "parameters": {"type": "dict", "properties": {"x": {"type": "integer", "description": "x"}},
                                   "required": ["x"]}},),
        ground_truth=({name: {"x": [i]}},),
    )


def make_cases(n: int) -> list[Case]:
    return [make_case(i) for i in range(n)]


def bfcl_variants(n: int | None = None) -> list[Variant]:
    variants = list(load_grid("bfcl_v4").variants)
    return variants if n is None else variants[:n]


class StandInVerdict:
    def __init__(self, valid: bool) -> None:
        self.valid = valid

    def to_dict(self) -> dict[str, Any]:
        return {"valid": self.valid, "error_code": "VALID" if self.valid else "DECODER_FAILED",
                "bfcl_error_type": None if self.valid else "ast_decoder:decoder_failed",
                "failure_mode": None, "format_agnostic_valid": self.valid}


def stand_in_score(response: str, variant: Variant, case: Case) -> StandInVerdict:
    """Valid when the response names the case's function (enough to test the plumbing)."""
    return StandInVerdict(case.functions[0]["name"] in response)


def config(run_dir: Path, *, models: list[ModelSpec] | None = None, api_base: str | None = None,
           model: str = "openai/fake-model", concurrency: int = 8, timeout: float = 30.0, repeats: int = 1,
           max_retries: int = 5, max_cost: float | None = None, params: dict[str, Any] | None = None,
           backoff: float = 0.01) -> RunConfig:
    if models is None:
        models = [ModelSpec(name=model, params=model_params(params, repeats), api_base=api_base,
                            concurrency=concurrency, timeout=timeout)]
    return RunConfig(grid="bfcl_v4", dataset="standin", models=tuple(models), run_dir=run_dir, repeats=repeats,
                     max_retries=max_retries, max_cost=max_cost, backoff_base_s=backoff, backoff_max_s=backoff * 8)


def prepared(cfg: RunConfig, variants: list[Variant], cases: list[Case]) -> Prepared:
    from promptgrid.templates import Renderer

    return Prepared(cfg, "bfcl_v4", variants, cases, Renderer())


def language_twins() -> list[Variant]:
    """Two variants that render identically for English cases (instruction language en vs query)."""
    base = Variant()
    return [base, replace(base, instruction_language="query")]


def answer_right(request: dict[str, Any]) -> str:
    """Fake-server answer function: call the function the user asks for, in Python syntax."""
    import re

    user = request["messages"][-1]["content"]
    m = re.search(r"call (func_\d+) with x=(\d+)", user)
    return f"[{m.group(1)}(x={m.group(2)})]" if m else "no idea"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
