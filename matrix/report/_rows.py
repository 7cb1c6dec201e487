"""Job rows in, validated ``Job`` records out.

Rows come from the run store (``RunStore(run_dir).rows()``) or from an
exported JSONL file (``promptgrid export``); both follow the row contract in
docs/CONTRACTS.md. Values are coerced once here (SQLite gives 0/1 for
booleans, JSON gives null), so the statistics never see a loose dict.

How a job counts:

- ``error`` set (the call failed): scored, incorrect in every rate, and
  counted separately as an error;
- ``valid`` true/false: scored;
- ``valid`` None and no error: *unscored* (the run was not scored yet); left
  out of every rate and reported in the notes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promptgrid.errors import ReportError

__all__ = ["Job", "load_jsonl", "normalize_rows"]

_REQUIRED = ("model", "variant_id", "case_id")


@dataclass(frozen=True, slots=True)
class Job:
    """One (model, variant, case, repeat) as the report needs it."""

    model: str
    variant_id: str
    label: str
    dimensions: Mapping[str, Any]
    case_id: str
    language: str
    category: str
    repeat: int
    scored: bool
    correct: bool
    error: str | None
    fsa: bool | None
    format_match: bool | None
    format_agnostic: bool | None
    tool: tuple[int, int, int]
    arg: tuple[int, int, int]
    failure_mode: str | None
    error_code: str | None
    response: str
    latency_s: float | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    key: str | None = None  # the call's key: rows of identical prompts share one call (count its cost once)
    extra: Mapping[str, Any] = field(default_factory=dict)


def _as_bool(value: Any, where: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
        return value.strip().lower() in ("true", "1")
    raise ReportError(f"{where}: expected true, false or null, got {value!r}.")


def _as_int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _as_opt_float(value: Any) -> float | None:
    if value is None or value == "":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _as_opt_int(value: Any) -> int | None:
    f = _as_opt_float(value)
    return None if f is None else int(f)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def normalize_rows(rows: Iterable[Mapping[str, Any]]) -> list[Job]:
    """Validate rows and turn them into ``Job`` records (error names the row and field)."""
    jobs: list[Job] = []
    for i, row in enumerate(rows):
        where = f"row {i + 1}"
        if not isinstance(row, Mapping):
            raise ReportError(f"{where}: expected a JSON object, got {type(row).__name__}.")
        for key in _REQUIRED:
            if row.get(key) in (None, ""):
                raise ReportError(
                    f"{where}: field {key!r} is missing or empty; every row needs "
                    f"{', '.join(_REQUIRED)} (see docs/CONTRACTS.md, RunStore.rows)."
                )
        error = row.get("error")
        error = str(error) if error not in (None, "") else None
        valid = _as_bool(row.get("valid"), f"{where}, field 'valid'")
        scored = error is not None or valid is not None
        correct = bool(valid) and error is None
        dims = row.get("dimensions") or {}
        if not isinstance(dims, Mapping):
            raise ReportError(f"{where}: field 'dimensions' must be an object, got {type(dims).__name__}.")

        def rate(name: str, row: Mapping[str, Any] = row, where: str = where, error: str | None = error) -> bool | None:
            value = _as_bool(row.get(name), f"{where}, field {name!r}")
            return False if error is not None else value

        jobs.append(
            Job(
                model=str(row["model"]),
                variant_id=str(row["variant_id"]),
                label=str(row.get("label") or row["variant_id"]),
                dimensions=dict(dims),
                case_id=str(row["case_id"]),
                language=str(row.get("case_language") or "en"),
                category=str(row.get("case_category") or ""),
                repeat=_as_int(row.get("repeat")),
                scored=scored,
                correct=correct,
                error=error,
                fsa=rate("function_selection_correct"),
                format_match=rate("format_match"),
                format_agnostic=rate("format_agnostic_valid"),
                tool=(_as_int(row.get("tool_tp")), _as_int(row.get("tool_fp")), _as_int(row.get("tool_fn"))),
                arg=(_as_int(row.get("arg_tp")), _as_int(row.get("arg_fp")), _as_int(row.get("arg_fn"))),
                failure_mode=str(row["failure_mode"]) if row.get("failure_mode") not in (None, "") else None,
                error_code=str(row["error_code"]) if row.get("error_code") not in (None, "") else None,
                response=_text(row.get("response")),
                latency_s=_as_opt_float(row.get("latency_s")),
                input_tokens=_as_opt_int(row.get("input_tokens")),
                output_tokens=_as_opt_int(row.get("output_tokens")),
                cost_usd=_as_opt_float(row.get("cost_usd")),
                key=str(row["key"]) if row.get("key") not in (None, "") else None,
            )
        )
    if not jobs:
        raise ReportError("no rows to report on: the run has no results yet (run it with: promptgrid run ...).")
    return jobs


def load_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Read an exported run (one JSON object per line); errors name the file and line."""
    p = Path(path)
    rows: list[dict[str, Any]] = []
    try:
        handle = p.open(encoding="utf-8")
    except OSError as exc:
        raise ReportError(f"cannot read {p}: {exc.strerror or exc}.") from None
    with handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ReportError(f"{p}, line {lineno}: not valid JSON ({exc.msg}).") from None
            if not isinstance(value, dict):
                raise ReportError(f"{p}, line {lineno}: expected a JSON object per line.")
            rows.append(value)
    return rows
