"""``promptgrid score`` (re-score a run offline) and ``promptgrid score-file`` (score a JSONL of responses).

The scoring itself is ``promptgrid.matrix.running.session.rescore`` and
``promptgrid.matrix.scoring.score_stream``; this module maps flags to them,
prints, and picks the exit code (1 when some responses could not be scored, 2 for a bad
argument).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from promptgrid.display import escape_controls
from promptgrid.safeio import atomic_output, check_output

__all__ = ["SCORE_FILE_INPUT", "cmd_score", "cmd_score_file"]

# `promptgrid score-file --help`: the input format (docs/score-file.md says the same at more length).
SCORE_FILE_INPUT = """\
Score model responses offline: each line of INPUT (a JSONL file, or - for standard input) is one
JSON object; it is written to standard output (or --output) with the verdict's fields added
(valid, error_code, bfcl_error_type, failure_mode, ...), every other field kept.

Fields read from a line:
  response    the model's answer text (null: an empty answer); bfcl-eval's "result" is read when
              "response" is absent
  case_id     the case's id in --dataset; bfcl-eval's "id" is read when "case_id" is absent
  variant_id  the prompt variant's id (as `promptgrid grid show` prints it); when absent, the
              CONFIG of a bfcl-eval id format_sensitivity_N:CONFIG:ENTRY (whose ENTRY is then
              the case), else --variant

bfcl-eval's multi-turn result lines ({"id": ..., "result": [[step, ...], ...]}, one list of steps per
user turn) are read with --dataset bfcl:multi_turn_base (or _miss_func, _miss_param, _long_context):
each step is decoded in --variant's format (default: bfcl-eval's Python calls) or read as function-call
objects, the calls run against BFCL's simulated APIs in a bounded worker (never eval), and the entry
scored by state and results as bfcl-eval's multi_turn_checker does; the verdict of every turn is added.

So promptgrid's own lines (`promptgrid render --jsonl` plus a response; `promptgrid export`)
and bfcl-eval's result files (result/MODEL/.../BFCL_v4_format_sensitivity_result.json, one
{"id": ..., "result": ...} a line) are both read as they are; for bfcl-eval results of other
categories pass --variant (its default prompt is
ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=classic).

A line that cannot be scored is reported on standard error as INPUT:LINE and left out; the others
are still scored (exit code 1 then). The last line on standard error is the accuracy over the
scored lines with its 95% Wilson interval (every line counted as an independent trial).
"""


def cmd_score(args: argparse.Namespace) -> int:
    """``promptgrid score RUN_DIR``: the run's kind judges its stored answers again (``Kind.rescore``) and says
    what it did (``Kind.print_rescore``: its exit code)."""
    from promptgrid.matrix.episodes import kind_of_run

    kind = kind_of_run(args.run_dir)
    return kind.print_rescore(Path(args.run_dir), kind.rescore(Path(args.run_dir)), sys.stdout, sys.stderr)



def cmd_score_file(args: argparse.Namespace) -> int:
    """``promptgrid score-file INPUT.jsonl|- --dataset DS [--variant ID] [--output OUT] [--grid G]``.

    The input format is ``score_stream``'s (and ``promptgrid score-file --help``'s):
    promptgrid lines (``variant_id``, ``case_id``, ``response``) or bfcl-eval's
    result lines (``id``, ``result``); ``-`` reads standard input. The scored
    lines go to standard output or ``--output``; lines that cannot be scored
    are reported with their line numbers and left out, and the exit code is
    then 1. The last line on standard error is the accuracy over the scored
    lines with its Wilson interval.
    """
    from promptgrid.matrix.episodes import kind_of_dataset

    from_stdin = args.input == "-"
    path = Path(args.input)
    if not from_stdin and (not path.exists() or path.is_dir()):  # a FIFO or <(command) is read like a file
        return _bad_argument(f"input file {args.input} not found. Give a JSONL file (or - for standard input) "
                             "with variant_id, case_id and response on each line, or bfcl-eval's id and result.")
    inputs = [] if from_stdin else [path]  # never written over: the responses, and a jsonl: dataset's file
    if args.dataset.startswith("jsonl:"):
        inputs.append(Path(args.dataset.removeprefix("jsonl:").strip()).expanduser())
    if args.output:
        check_output(args.output, inputs=inputs)  # before any work
    kind = kind_of_dataset(args.dataset)
    name = "<stdin>" if from_stdin else str(path)
    with contextlib.ExitStack() as stack:
        source = sys.stdin.buffer if from_stdin else stack.enter_context(path.open("rb"))
        sink = stack.enter_context(atomic_output(args.output, inputs=inputs)) if args.output else sys.stdout
        scored, valid, failed, rule = kind.score_file(
            source, sink, name=name, dataset=args.dataset, grid=args.grid, variant=args.variant,
            strict_arguments=bool(getattr(args, "strict_arguments", False)), bfcl_data=args.bfcl_data,
            errors=sys.stderr)
    print(f"promptgrid: {_accuracy_line(scored, valid)}{rule}"
          + (f"; {failed} line(s) could not be scored (see above)." if failed else "."), file=sys.stderr)
    return 1 if failed else 0


def _bad_argument(message: str) -> int:
    """Print a bad argument's one-line message as ``main`` prints errors; exit code 2, as for argparse's own."""
    print(f"promptgrid: error: {escape_controls(message)}", file=sys.stderr)
    return 2


def _accuracy_line(n: int, correct: int) -> str:
    """``scored N line(s): C correct, accuracy A% (95% Wilson CI lo-hi%)``.

    The interval counts every line as an independent trial: for lines of many
    variants over the same cases it is narrower than a per-case analysis
    (``promptgrid report``) would give.
    """
    if n == 0:
        return "no line was scored"
    from promptgrid.matrix.report._wilson import DEFAULT_CONFIDENCE, wilson_interval

    lo, hi = wilson_interval(correct, n, DEFAULT_CONFIDENCE)
    return (f"scored {n} line(s): {correct} correct, accuracy {100 * correct / n:.1f}% "
            f"({DEFAULT_CONFIDENCE:.0%} Wilson CI {100 * lo:.1f}-{100 * hi:.1f}%)")
