"""Handlers of ``promptgrid report`` and ``promptgrid compare``.

RUN_DIR is a run directory (rows read from its store, ``RunStore.rows``) or,
for convenience, a JSONL file written by ``promptgrid export`` (``read_results``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from promptgrid.errors import ReportError
from promptgrid.matrix.report import build_report, compare_runs
from promptgrid.matrix.running.results import ResultRow, read_results
from promptgrid.matrix.running.store import STORE_FILE, RunStore

__all__ = ["cmd_compare", "cmd_report", "load_rows"]


def load_rows(source: str | Path) -> list[ResultRow]:
    """Rows of a run directory (its store) or of an exported JSONL file."""
    p = Path(source)
    if p.is_file():
        if p.suffix in (".jsonl", ".json", ".ndjson"):
            return read_results(p)
        raise ReportError(
            f"{p} is a file but not a JSONL export; give a run directory or a file from promptgrid export."
        )
    if not p.is_dir():
        raise ReportError(f"{p} does not exist; give a run directory (promptgrid run --run-dir DIR) or a JSONL export.")
    if not (p / STORE_FILE).exists():
        raise ReportError(
            f"{p} has no {STORE_FILE}: it is not a run directory. Give the directory a run wrote "
            "(promptgrid run --run-dir DIR) or a JSONL export (promptgrid export DIR --output FILE)."
        )
    with RunStore(p) as store:
        return list(store.rows())


def cmd_report(args: argparse.Namespace) -> int:
    rows = load_rows(args.run_dir)
    if args.format is None and args.out is None:
        formats: set[str] = set()
    else:
        formats = {args.format or "all"}
    default_out = (
        Path(args.run_dir).parent / "report" if Path(args.run_dir).is_file() else Path(args.run_dir) / "report"
    )
    out = Path(args.out) if args.out else default_out
    result = build_report(rows, out if formats else None, baseline=args.baseline, formats=formats)
    sys.stdout.write(result.console)
    if result.files:
        print(f"\nwrote {len(result.files)} file(s) to {out}", file=sys.stderr)
        html = out / "report.html"
        if html in result.files:
            print(f"open {html}", file=sys.stderr)
    return 0


def _run_name(source: str, default: str) -> str:
    p = Path(source)
    return (p.stem if p.is_file() else p.resolve().name) or default


def cmd_compare(args: argparse.Namespace) -> int:
    rows_a, rows_b = load_rows(args.run_a), load_rows(args.run_b)
    names = (_run_name(args.run_a, "A"), _run_name(args.run_b, "B"))
    if names[0] == names[1]:
        names = (f"A:{names[0]}", f"B:{names[1]}")
    result = compare_runs(rows_a, rows_b, Path(args.out) if args.out else None, names=names)
    sys.stdout.write(result.console)
    if result.files:
        print(f"\nwrote {len(result.files)} file(s) to {args.out}", file=sys.stderr)
    return 0
