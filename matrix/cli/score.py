"""``promptgrid score`` (re-score a run offline) and ``promptgrid score-file`` (score a JSONL of responses).

The scoring itself is ``promptgrid.matrix.running.session.rescore`` and
``promptgrid.matrix.scoring.score_stream``; this module maps flags to them,
prints, and picks the exit code (1 when some responses could not be scored).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from promptgrid.errors import PromptgridError
from promptgrid.safeio import atomic_output, check_output

__all__ = ["cmd_score", "cmd_score_file"]


def cmd_score(args: argparse.Namespace) -> int:
    from promptgrid.matrix.cli.run import accuracy_table
    from promptgrid.matrix.running.session import rescore

    stats = rescore(args.run_dir)
    print(f"re-scored {stats['scored']} responses ({stats['changed']} changed validity; "
          f"{stats['errors']} failed calls have no response; {stats['failed']} could not be scored). "
          "No model was called.", file=sys.stderr)
    table = accuracy_table(args.run_dir)
    if table:
        print(table)
    return 1 if stats["failed"] else 0


def cmd_score_file(args: argparse.Namespace) -> int:
    """``promptgrid score-file INPUT.jsonl --dataset DS [--output OUT] [--grid G] [--bfcl-data P]``.

    Each input line needs ``variant_id``, ``case_id`` and ``response`` (the
    lines ``promptgrid render --jsonl`` prints, plus a response); bfcl-eval
    ids ``format_sensitivity_N:CONFIG:ENTRY`` in ``case_id`` work too. Every
    field is written back with the verdict's fields added. Lines that cannot
    be scored are reported with their line numbers and left out; the exit
    code is then 1.
    """
    from promptgrid.matrix.datasets import load_dataset
    from promptgrid.matrix.scoring import score_stream, variant_index

    path = Path(args.input)
    if not path.is_file():
        raise PromptgridError(f"input file {args.input} not found. Give a JSONL file with variant_id, case_id "
                              "and response on each line.")
    inputs = [path]  # never written over: the responses, and a jsonl: dataset's file
    if args.dataset.startswith("jsonl:"):
        inputs.append(Path(args.dataset.removeprefix("jsonl:").strip()).expanduser())
    if args.output:
        check_output(args.output, inputs=inputs)  # before any work
    dataset = load_dataset(args.dataset, bfcl_data=args.bfcl_data)
    cases = {c.id: c for c in dataset.cases}
    variants = variant_index(args.grid)
    with path.open("rb") as source:
        if args.output:
            with atomic_output(args.output, inputs=inputs) as sink:
                scored, failed = score_stream(source, sink, name=str(path), variants=variants, cases=cases,
                                              grid=args.grid, errors=sys.stderr)
        else:
            scored, failed = score_stream(source, sys.stdout, name=str(path), variants=variants, cases=cases,
                                          grid=args.grid, errors=sys.stderr)
    if failed:
        print(f"promptgrid: scored {scored} line(s); {failed} could not be scored (see above).", file=sys.stderr)
        return 1
    return 0
