"""``promptgrid export-batch`` and ``import-batch``: OpenAI batch files for engines promptgrid does not drive.

The work is ``promptgrid.matrix.running.exchange``'s (through
``promptgrid.export_batch`` / ``import_batch``); this module maps flags,
prints what was done (the request lines go to standard output or ``-o``, the
messages to standard error) and picks the exit code: 0 done, 2 bad input
(an import file with a malformed, foreign or duplicate line stores nothing).
"""

from __future__ import annotations

import argparse
import sys

from promptgrid.matrix import api
from promptgrid.matrix.running.config import PlanOptions
from promptgrid.matrix.running.exchange import ExportSummary, ImportSummary
from promptgrid.matrix.running.options import from_args

__all__ = ["cmd_export_batch", "cmd_import_batch", "export_note", "import_note"]


def cmd_export_batch(args: argparse.Namespace) -> int:
    summary = api.export_batch(
        args.run_dir, args.model, args.output if args.output is not None else sys.stdout.buffer,
        body_model=args.body_model, retry_errors=args.retry_errors, grid=args.grid, dataset=args.dataset,
        append=args.append, **from_args(args, PlanOptions))
    print(export_note(summary, args.run_dir, args.output), file=sys.stderr)
    return 0


def cmd_import_batch(args: argparse.Namespace) -> int:
    summary = api.import_batch(args.run_dir, args.results)
    print(import_note(summary, args.run_dir), file=sys.stderr)
    return 0


def export_note(s: ExportSummary, run_dir: str, output: str | None) -> str:
    """What an export wrote and skipped, and what to do next."""
    where = output or "standard output"
    skipped = (f"{s.stored} have a stored result" + ("" if s.stored == 0 else " (--retry-errors writes the errors "
                                                     "again)")
               + f", {s.unsupported} cannot be sent to {s.model} (stored unsupported)"
               + f", {s.in_batch} are in a live provider batch")
    head = (f"export-batch: {s.lines} request line(s) for {s.model} written to {where}; of the plan's {s.jobs} "
            f"jobs, {s.shared} share a line with an identical prompt, {skipped}.")
    # What comes next: an adaptive plan's next round, or a conversation run's next round.
    then = f"\n{s.planned.rstrip('.')}." if s.planned else ""
    if not s.lines:
        return head + " Nothing to export." + then
    return (f"{head}\nRun them on your engine (e.g. vllm run-batch -i REQUESTS.jsonl -o RESULTS.jsonl --model "
            f"NAME), then store the answers: promptgrid import-batch {run_dir} RESULTS.jsonl" + then)


def import_note(s: ImportSummary, run_dir: str) -> str:
    """What an import stored, and what is left."""
    kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(s.error_kinds.items()))
    out = (f"import-batch: {s.lines} line(s): {s.stored} stored ({s.answers} answers, {s.errors} errors"
           + (f": {kinds}" if kinds else "") + f"), {s.already} already stored.")
    if s.pending:
        out += (f"\n{s.pending} exported call(s) still have no result: import the rest of the results, or "
                f"promptgrid export-batch {run_dir} --model M again to write them anew.")
    if s.errors:
        out += (f"\nCalls that ended in an error are final: promptgrid export-batch {run_dir} --model M "
                "--retry-errors writes them again.")
    return out
