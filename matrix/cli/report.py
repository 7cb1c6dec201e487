"""Handlers of ``promptgrid report`` and ``promptgrid compare``.

RUN_DIR is a run directory (read-only) or, for convenience, a JSONL file
written by ``promptgrid export``: ``promptgrid.report`` and
``promptgrid.load_results`` read either.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from promptgrid.matrix.api import load_results, report
from promptgrid.matrix.report import compare_runs

__all__ = ["cmd_compare", "cmd_report"]


def cmd_report(args: argparse.Namespace) -> int:
    """``promptgrid report RUN`` of either kind: the console table; ``--format`` (or ``--out``, which means all)
    also writes the report files into ``--out`` (default ``RUN/report``)."""
    formats: set[str] = set() if args.format is None and args.out is None else {args.format or "all"}
    default_out = (
        Path(args.run_dir).parent / "report" if Path(args.run_dir).is_file() else Path(args.run_dir) / "report"
    )
    out = Path(args.out) if args.out else default_out
    result = report(args.run_dir, out if formats else None, formats=formats, baseline=args.baseline,
                    episodes=getattr(args, "episode", None), transcripts=getattr(args, "transcripts", None))
    sys.stdout.write(result.console)
    if result.files:
        print(f"\nwrote {len(result.files)} file(s) to {out}", file=sys.stderr)
        page = next((f for f in result.files if f.name in ("report.html", "conversations.html")), None)
        if page is not None:
            print(f"open {page}", file=sys.stderr)
    return 0


def _run_name(source: str, default: str) -> str:
    p = Path(source)
    return (p.stem if p.is_file() else p.resolve().name) or default


def cmd_compare(args: argparse.Namespace) -> int:
    rows_a, rows_b = load_results(args.run_a), load_results(args.run_b)
    names = (_run_name(args.run_a, "A"), _run_name(args.run_b, "B"))
    if names[0] == names[1]:
        names = (f"A:{names[0]}", f"B:{names[1]}")
    result = compare_runs(rows_a, rows_b, Path(args.out) if args.out else None, names=names)
    sys.stdout.write(result.console)
    if result.files:
        print(f"\nwrote {len(result.files)} file(s) to {args.out}", file=sys.stderr)
    return 0
