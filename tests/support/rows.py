"""Result-row builders for the report and compare tests: hand-made rows and JSONL files of them."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from promptgrid.variants import Variant


def make_row(
    variant: Variant | None = None,
    *,
    model: str = "m",
    case_id: str = "c0",
    valid: bool | None = True,
    error: str | None = None,
    repeat: int = 0,
    language: str = "en",
    **extra: Any,
) -> dict[str, Any]:
    """One job row as the store exports it (docs/CONTRACTS.md), with sensible defaults."""
    v = variant or Variant()
    row: dict[str, Any] = {
        "model": model,
        "variant_id": v.id,
        "label": v.label,
        "dimensions": v.dimensions(),
        "case_id": case_id,
        "case_group": case_id.split("_")[0],
        "case_language": language,
        "case_category": "simple",
        "repeat": repeat,
        "response": "[f(x=1)]" if error is None else None,
        "error": error,
        "valid": None if error is not None else valid,
        "error_code": None if valid is None else ("VALID" if valid else "WRONG_FUNC_NAME"),
        "bfcl_error_type": None,
        "failure_mode": None if valid or error else "wrong_function",
        "format_agnostic_valid": valid,
        "format_match": valid,
        "function_selection_correct": valid,
        "tool_tp": 1 if valid else 0,
        "tool_fp": 0 if valid else 1,
        "tool_fn": 0 if valid else 1,
        "arg_tp": 1 if valid else 0,
        "arg_fp": 0,
        "arg_fn": 0 if valid else 1,
        "latency_s": 0.5,
        "input_tokens": 100,
        "output_tokens": 20,
        "cost_usd": 0.001,
    }
    row.update(extra)
    return row


def rows_with_accuracy(
    spec: dict[Variant, Iterable[bool]], *, model: str = "m", language: str = "en", prefix: str = "c"
) -> list[dict[str, Any]]:
    """Rows whose outcomes per case are given per variant (case i = i-th outcome)."""
    out = []
    for v, outcomes in spec.items():
        for i, ok in enumerate(outcomes):
            out.append(make_row(v, model=model, case_id=f"{prefix}{i:03d}", valid=bool(ok), language=language))
    return out


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> Path:
    with path.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return path
