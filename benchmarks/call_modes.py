"""Measurement: per call mode and return format, the share of answers that parse as calls, and the accuracy.

Reads a run of the ``call_modes`` grid (or any grid with a ``call_mode``
dimension) and prints one Markdown table row per (call mode, return format),
with n per cell, so a partial run reads honestly. Run:

    .venv/bin/python benchmarks/call_modes.py RUN_DIR_OR_EXPORT.jsonl

"Parses as calls": the call did not fail and the answer is not one of the
format-level failure modes (``PARSE_FAILURE_MODES``: prose, no call, another
format, unclosed tag, bad escaping, ...); a correct answer counts as parsed.
A well-formed call with the wrong function, count or values parses. Unsupported
jobs (never sent) are counted apart with their reason, in no rate.
Pending jobs (a run still going) are left out.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter, defaultdict

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from promptgrid.matrix.api import load_results  # noqa: E402
from promptgrid.matrix.report._call_modes import PARSE_FAILURE_MODES  # noqa: E402  (one definition)
from promptgrid.matrix.running.results import ResultRow  # noqa: E402

MODES = ("prompt", "constrained", "native")


def parses_as_call(row: ResultRow) -> bool:
    """A scored answer that parses as calls: no failed call and no format-level failure mode."""
    return row.error is None and (bool(row.valid) or row.failure_mode not in PARSE_FAILURE_MODES)


def cell_key(row: ResultRow) -> tuple[str, str, str]:
    """(model, call mode, return format); native has no return format ('-')."""
    dims = row.dimensions
    mode = str(dims.get("call_mode", "prompt"))
    return row.model, mode, "-" if mode == "native" else str(dims.get("return_format", "-"))


def table(rows: list[ResultRow]) -> str:
    """The Markdown table (one row per model, call mode and return format) and the unsupported lines."""
    cells: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0, 0])  # n, parsed, correct
    unsupported: Counter[tuple[str, str, str, str]] = Counter()
    for r in rows:
        if r.status == "unsupported":
            unsupported[(*cell_key(r), r.error or "")] += 1
        elif r.valid is not None or r.error is not None:
            c = cells[cell_key(r)]
            c[0] += 1
            c[1] += parses_as_call(r)
            c[2] += bool(r.valid)
    rank = {m: i for i, m in enumerate(MODES)}
    lines = ["| model | call mode | return format | n | parse as calls | accuracy |", "|---|---|---|---:|---:|---:|"]
    for (model, mode, fmt), (n, parsed, correct) in sorted(cells.items(),
                                                           key=lambda kv: (kv[0][0], rank.get(kv[0][1], 9), kv[0][2])):
        lines.append(f"| {model} | {mode} | {fmt} | {n} | {100 * parsed / n:.0f}% ({parsed}/{n}) "
                     f"| {100 * correct / n:.0f}% ({correct}/{n}) |")
    for (model, mode, _fmt, reason), n in sorted(unsupported.items()):
        lines.append(f"\n{model} {mode}: {n} jobs unsupported (never sent): {reason}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="run directory or JSONL file from promptgrid export")
    args = parser.parse_args()
    print(table(load_results(args.source)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
