"""``ResultRow``: one (model, variant, case, repeat) of a run, the one shape results take.

The store yields it (``RunStore.rows``), ``promptgrid export --jsonl`` writes
it (``to_dict``, with ``schema_version``), ``report`` and ``compare`` read it
(``from_dict`` for exported files), and ``Run.results()`` returns it. Field
names are those of the JSONL export; the docstring under each field is the
contract (there is no second description of it elsewhere).

Several rows can share one model call (identical prompts across variants are
sent once): they have the same ``key``; count cost and tokens once per key.

Schema versions:

- 1: this layout. Files exported before ``schema_version`` existed carry the
  same fields without it and are read as version 1.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promptgrid.errors import ReportError

__all__ = ["RESULT_SCHEMA_VERSION", "ResultRow", "read_results", "write_results"]

RESULT_SCHEMA_VERSION = 1

STATUSES = ("done", "error", "pending")


@dataclass(frozen=True, slots=True)
class ResultRow:
    """One job of a run and how it ended (answered and scored, failed, or still pending)."""

    model: str
    """The model string as given (``openai/gpt-4o-mini``, ``local/smollm2-135m``)."""
    variant_id: str
    """The variant's canonical id (BFCL's query string, then any non-default extra dimension)."""
    case_id: str
    """The test case's id."""
    repeat: int = 0
    """Repeat index, 0 .. repeats-1 (pass^k needs several)."""
    key: str | None = None
    """The model call's cache key; rows of identical prompts share one call."""
    status: str = "done"
    """``done`` (answered), ``error`` (the call failed for good) or ``pending`` (not sent yet)."""
    response: str | None = None
    """The model's answer text (``None`` unless ``status == "done"``)."""
    error: str | None = None
    """Why the call failed (keys redacted); ``None`` unless ``status == "error"``."""
    error_kind: str | None = None
    """The failure's class: rate_limit, timeout, server, auth, bad_request, context_length, ..."""
    valid: bool | None = None
    """The BFCL verdict: ``True`` correct, ``False`` wrong or failed call, ``None`` not scored."""
    error_code: str | None = None
    """Why the answer is not valid (``ErrorCode`` name, ``VALID`` when valid); ``None`` for failed calls."""
    bfcl_error_type: str | None = None
    """bfcl-eval's error type string (``simple_function_checker:wrong_func_name``); ``None`` when valid."""
    failure_mode: str | None = None
    """What the model did wrong, in the BFCL V4 blog's terms (``FailureMode`` value)."""
    format_agnostic_valid: bool | None = None
    """Would the answer be valid read in whatever format the model used?"""
    detected_format: str | None = None
    """The return format the answer is written in, ``None`` when it holds no call."""
    format_match: bool | None = None
    """ITC format match: the answer is in the requested format (``None``: free text, no call expected)."""
    function_selection_correct: bool | None = None
    """MASSIVE-Agents FSA: the called function names are the expected ones, arguments aside."""
    tool_tp: int = 0
    """ITC tool selection: true positives over function names."""
    tool_fp: int = 0
    """ITC tool selection: false positives."""
    tool_fn: int = 0
    """ITC tool selection: false negatives."""
    arg_tp: int = 0
    """ITC tool invocation: true positives over (function, parameter, value) triples."""
    arg_fp: int = 0
    """ITC tool invocation: false positives."""
    arg_fn: int = 0
    """ITC tool invocation: false negatives."""
    n_expected_calls: int = 0
    """Calls in the ground truth."""
    n_predicted_calls: int = 0
    """Calls decoded from the answer."""
    message: str = ""
    """One readable line on why the answer failed (empty when valid)."""
    response_language: str | None = None
    """Language identified in a free-text answer (no call); ``None`` otherwise."""
    language_match: bool | None = None
    """ITC language match: a free-text answer is in the query's language; ``None`` when not measured."""
    latency_s: float | None = None
    """Seconds the successful attempt took."""
    input_tokens: int | None = None
    """Prompt tokens billed for the call."""
    output_tokens: int | None = None
    """Completion tokens billed for the call."""
    cost_usd: float | None = None
    """The call's cost in USD (litellm's price map; ``None`` when unknown)."""
    attempts: int | None = None
    """Attempts the call took (retries included)."""
    finish_reason: str | None = None
    """The provider's finish reason (``stop``, ``length``, ...)."""
    raw_model: str | None = None
    """The model name the provider reported."""
    params: Mapping[str, Any] | None = None
    """Generation parameters sent (temperature, max_tokens, seed, ...)."""
    dimensions: Mapping[str, Any] = field(default_factory=dict)
    """The variant's dimension values (``Variant.dimensions()``)."""
    label: str = ""
    """The variant's short label (BFCL figure notation, ``json->python,False``)."""
    case_language: str = "en"
    """The language of the case's query."""
    case_category: str = ""
    """simple, multiple, parallel, parallel_multiple or irrelevance."""
    case_group: str = ""
    """Shared by the translations of one case (pairs per-language results)."""

    @property
    def scored(self) -> bool:
        """The answer has a verdict (``valid`` is not ``None``)."""
        return self.valid is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict with ``schema_version`` first (one JSONL export line)."""
        out: dict[str, Any] = {"schema_version": RESULT_SCHEMA_VERSION}
        for f in _FIELDS:
            value = getattr(self, f)
            out[f] = dict(value) if isinstance(value, Mapping) else value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "row") -> ResultRow:
        """Read one exported row; unknown keys are ignored, wrong types raise ``ReportError`` naming ``where``."""
        if not isinstance(data, Mapping):
            raise ReportError(f"{where}: expected a JSON object, got {type(data).__name__}.")
        version = data.get("schema_version", RESULT_SCHEMA_VERSION)
        if version != RESULT_SCHEMA_VERSION:
            raise ReportError(f"{where}: schema_version {version!r} is not supported (this promptgrid reads "
                              f"{RESULT_SCHEMA_VERSION}); export the run again with this version.")
        missing = [k for k in ("model", "variant_id", "case_id") if not isinstance(data.get(k), str) or not data[k]]
        if missing:
            raise ReportError(f"{where}: missing or empty field(s) {', '.join(missing)}; "
                              "give rows written by `promptgrid export --jsonl`.")
        values: dict[str, Any] = {}
        for name, kind in _KINDS.items():
            if name not in data or data[name] is None:
                continue
            values[name] = _coerce(data[name], kind, name, where)
        status = values.get("status", "done")
        if status not in STATUSES:
            raise ReportError(f"{where}: status {status!r} is not one of {', '.join(STATUSES)}.")
        return cls(**values)


_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(ResultRow))
_KINDS: dict[str, str] = {f.name: str(f.type) for f in dataclasses.fields(ResultRow)}


def _coerce(value: Any, kind: str, name: str, where: str) -> Any:
    """Check one field's JSON value against its declared type (bool is not an int here)."""
    base = kind.replace(" | None", "")
    ok: bool
    if base == "str":
        ok = isinstance(value, str)
    elif base == "bool":
        ok = isinstance(value, bool)
    elif base == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif base == "float":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        value = float(value) if ok else value
    elif base.startswith("Mapping"):
        ok = isinstance(value, Mapping)
    else:  # pragma: no cover - every declared type is handled above
        ok = True
    if not ok:
        raise ReportError(f"{where}: field {name!r} must be {base}, got {json.dumps(value)[:60]}.")
    return value


def read_results(path: str | Path) -> list[ResultRow]:
    """Rows of an exported JSONL file (``promptgrid export --jsonl``); errors name the file and line."""
    p = Path(path)
    try:
        handle = p.open(encoding="utf-8")
    except OSError as exc:
        raise ReportError(f"cannot read {p}: {exc.strerror or exc}.") from None
    rows: list[ResultRow] = []
    with handle:
        for lineno, line in enumerate(handle, 1):
            if not line.strip():
                continue
            where = f"{p}:{lineno}"
            try:
                data = json.loads(line)
            except (ValueError, RecursionError) as exc:
                raise ReportError(f"{where}: not valid JSON ({exc}).") from None
            rows.append(ResultRow.from_dict(data, where=where))
    if not rows:
        raise ReportError(f"{p} holds no rows; export a run with `promptgrid export RUN_DIR --jsonl`.")
    return rows


def write_results(rows: Iterable[ResultRow], out: Any) -> int:
    """Write rows as JSONL to a text stream; returns how many were written."""
    n = 0
    for row in rows:
        out.write(json.dumps(row.to_dict(), ensure_ascii=False) + "\n")
        n += 1
    return n


def iter_dicts(rows: Iterable[ResultRow]) -> Iterator[dict[str, Any]]:
    """``row.to_dict()`` for each row (for tabulating or pandas)."""
    for row in rows:
        yield row.to_dict()
