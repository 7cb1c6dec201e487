"""``promptgrid run`` and ``promptgrid export``: flags in, the library called, messages and exit codes out.

``run`` is resumable by design: the same command again sends only the calls
that have no result yet (it says so when there is nothing left to send).
The work is done by ``promptgrid.matrix.running.session`` (the code behind
``promptgrid.run``); this module only maps flags to its options, prints, and
picks the exit code: 0 done (some failed calls are data, not a failed
command), 1 the models' calls failed: a model was stopped by an error every
call would repeat (bad or missing key, unknown model, a Retry-After longer
than ``--retry-after-cap``) or every call sent ended in an error; 2 bad input,
3 stopped by ``--max-cost``, 130 interrupted. Whenever calls failed, the
errors are summed up per kind with one (redacted) example each.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from promptgrid.display import escape_controls
from promptgrid.errors import OutputError, RunError
from promptgrid.matrix import api
from promptgrid.matrix.api import Run
from promptgrid.matrix.running.config import RunConfig, RunOptions
from promptgrid.matrix.running.describe import (  # the lines a single-turn run prints: there, for the library too
    EXIT_CALLS_FAILED,
    EXIT_INTERRUPTED,
    EXIT_MAX_COST,
    accuracy_table,
    error_summary,
    exit_code,
    print_estimate,
    spill_note,
)
from promptgrid.matrix.running.options import from_args
from promptgrid.matrix.running.session import build_config as _build_config

__all__ = ["EXIT_CALLS_FAILED", "EXIT_INTERRUPTED", "EXIT_MAX_COST", "accuracy_table", "build_config", "cmd_export",
           "cmd_run", "error_summary", "exit_code", "print_estimate", "print_run", "spill_note"]


def build_config(args: argparse.Namespace) -> RunConfig:
    """The ``RunConfig`` of ``promptgrid run``'s flags (over a run config file when GRID is one): built once per
    command and passed on (``api.run``, given a ``RunConfig`` and no option, derives the same one from its
    fields)."""
    return _build_config(args.grid, args.dataset, **from_args(args, RunOptions))


def cmd_run(args: argparse.Namespace) -> int:
    from promptgrid.matrix.episodes import kind_of_dataset

    config = build_config(args)
    if args.dry_run:
        kind_of_dataset(config.dataset).dry_run(config, append=args.append, out=sys.stdout)
        return 0
    if (args.no_wait or args.poll != 30.0) and not args.batch:
        raise RunError("--no-wait and --poll apply to a batch run: add --batch.")
    run = api.run(config, progress=not args.no_progress, retry_errors=args.retry_errors, append=args.append,
                  batch=args.batch, batch_wait=not args.no_wait, batch_poll_s=args.poll)
    return print_run(run, sys.stdout, sys.stderr)


def print_run(run: Run, out: TextIO, err: TextIO) -> int:
    """Say what a run just did (stderr), print its results and what they mean (stdout), as its kind says them
    (``running.describe.print_run``, ``running.conversation_describe.print_conversation_run``); returns the exit
    code."""
    from promptgrid.matrix.episodes import kind_named

    return kind_named(run.kind).print_run(run, out, err)


def cmd_export(args: argparse.Namespace) -> int:
    """``promptgrid export RUN_DIR``: one JSON line per result (a single-turn run's jobs, ``ResultRow.to_dict``; a
    conversation run's episodes with their transcripts), to ``--output`` (replaced only when complete, never the
    run's store) or standard output."""
    from promptgrid.matrix.episodes import kind_of_run
    from promptgrid.safeio import atomic_output

    run_dir = Path(args.run_dir)
    lines, store_file, noun = kind_of_run(run_dir).export_lines(run_dir)  # a damaged store: an error, nothing written
    if not args.output:
        sys.stdout.writelines(lines)
        return 0
    n = 0
    try:
        with atomic_output(args.output, inputs=[store_file]) as fh:  # checked first; "-": standard output
            for line in lines:
                fh.write(line)
                n += 1
    except OSError as exc:
        raise OutputError(f"cannot write {args.output}: {exc.strerror or exc}.") from None
    print(f"exported {n} {noun} to {args.output}", file=sys.stderr)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """``promptgrid status RUN_DIR``: results per model and batches, after polling a single-turn run's batches
    (unless --no-poll; a conversation run's batches are collected by its own command, run --batch).

    Exit code: 0 when every live batch was polled (or none was asked for); 1 when the state was printed but
    one or more batches could not be polled (their batch API down, refusing or answering garbage: one redacted
    line each on stderr; the next ``status`` polls them again); 2 when the run directory is unusable.
    """
    import json

    if not (args.poll > 0 and args.poll != float("inf")):
        raise RunError(f"--poll must be a positive number of seconds, got {args.poll}.")
    st = api.status(args.run_dir, poll=not args.no_poll, wait=args.wait, poll_s=args.poll)
    print(json.dumps(st.to_dict(), indent=2) if args.json else status_text(st))
    for problem in st.problems:  # one redacted line per batch that could not be polled
        print(f"promptgrid: {escape_controls(problem)}", file=sys.stderr)
    return 1 if st.problems else 0


def status_text(st: Any) -> str:
    """The readable form of a ``RunStatus``: a jobs table per model, a batch table, and what to do next."""
    import json
    import time

    from tabulate import tabulate

    lines = [st.heading or f"run directory {st.path}"]
    lines.append(tabulate([[escape_controls(m), *rest] for m, *rest in st.models],
                          headers=list(st.headers or st.columns), tablefmt="github"))
    if st.batches:
        now = time.time()
        rows = []
        for b in st.batches:
            detail = json.loads(b.detail) if b.detail else {}
            done = ("" if detail.get("completed") is None
                    else f"{detail['completed']}/{detail.get('total') or b.requests}")
            rows.append([b.id, escape_controls(b.model), b.kind, b.state, detail.get("provider_state") or "",
                         b.requests, done, f"{(now - b.created_at) / 60:.0f} min"])
        lines.append("")
        lines.append(tabulate(rows, headers=["batch", "model", "kind", "state", "provider", "requests", "answered",
                                             "age"], tablefmt="github"))
    if st.collected is not None and st.collected.written:
        c = st.collected
        lines.append(f"\ncollected now: {c.answers} answers, {c.errors} errors"
                     + (f" ({', '.join(f'{k}: {n}' for k, n in sorted(c.error_kinds.items()))})" if c.errors else ""))
    if st.note:
        lines.append(escape_controls(st.note))
    live = st.live
    if live:
        lines.append(f"{len(live)} batch(es) still running: {st.live_hint.format(path=st.path)}.")
    return "\n".join(lines)
