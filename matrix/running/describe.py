"""What a single-turn run did, in words: the lines ``promptgrid run`` prints and its exit code.

``print_run`` says what a run just did (stderr: calls sent, batches, errors by kind, a model stopped, a spill
on a full disk, why it stopped early) and prints its accuracy table and what it means (stdout); ``dry_run``
prints what a run would send and cost. Library functions that write to the streams they are given, so the CLI
and a notebook print the same lines (``promptgrid.matrix.episodes``: the single-turn kind's ``print_run`` and
``dry_run``). Exit codes: 0 done (some failed calls are data, not a failed command), 1 the models' calls
failed (a model stopped by an error every call would repeat, or every call sent failed), 3 stopped by
``--max-cost``, 130 interrupted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from promptgrid.display import escape_controls

from .estimate import Estimate, estimate

if TYPE_CHECKING:  # pragma: no cover - types only
    from promptgrid.matrix.episodes._run import Run

    from .config import RunConfig
    from .results import ResultRow
    from .runner import RunSummary

__all__ = ["EXIT_CALLS_FAILED", "EXIT_INTERRUPTED", "EXIT_MAX_COST", "accuracy_table", "batch_note", "dry_run",
           "error_summary", "estimate_config", "exit_code", "print_estimate", "print_rescore", "print_run",
           "spill_note", "unsupported_note"]

EXIT_CALLS_FAILED = 1
"""A model halted, or every call sent ended in an error."""
EXIT_MAX_COST = 3
EXIT_INTERRUPTED = 130


def dry_run(config: RunConfig, *, append: bool, out: TextIO) -> None:
    """``promptgrid run --dry-run``: what the run would send and cost (``estimate``), nothing sent; the run
    directory checked first as the run would check it (``RunError`` for what it would refuse)."""
    print_estimate(estimate_config(config, append=append), out)


def estimate_config(config: RunConfig, *, append: bool = False) -> Estimate:
    """``pg.estimate`` of a single-turn dataset: ``estimate`` of the prepared run, its run directory checked first
    as the run would check it (``RunError`` for what it would refuse)."""
    from .session import check_run_dir, prepare

    prep = prepare(config)
    check_run_dir(prep, append=append)
    return estimate(prep)


def print_rescore(run_dir: Path, stats: Mapping[str, int], out: TextIO, err: TextIO) -> int:
    """What re-scoring a single-turn run did (``session.rescore``'s counts, ``err``) and its accuracy table
    (``out``); 1 when some responses could not be scored."""
    from promptgrid.matrix.episodes._run import Run

    print(f"re-scored {stats['scored']} responses ({stats['changed']} changed validity; "
          f"{stats['errors']} failed calls have no response; {stats['failed']} could not be scored). "
          "No model was called.", file=err)
    table = accuracy_table(Run(run_dir))
    if table:
        print(table, file=out)
    return 1 if stats["failed"] else 0


def exit_code(summary: RunSummary) -> int:
    """The exit code of a finished run: interrupted, then max cost, then failed calls (a halted model, or
    every call sent failed), else 0."""
    if summary.stopped == "interrupted":
        return EXIT_INTERRUPTED
    if summary.stopped == "max_cost":
        return EXIT_MAX_COST
    return EXIT_CALLS_FAILED if summary.halted or summary.all_failed else 0


def print_run(run: Run, out: TextIO, err: TextIO) -> int:
    """Say what a run just did (stderr), print its accuracy table and what it means (stdout); returns its exit
    code."""
    s = run.summary
    assert s is not None, "print_run needs the Run that run()/execute made"
    path = run.path
    _print_sent(s, path, err)
    _print_stop(run, s, path, err)
    if s.errors:
        print(error_summary(s), file=err)
    if s.unsupported:
        print(unsupported_note(s), file=err)
    for model, error in s.halted.items():
        print(f"model {model}: stopped after an error every call would repeat: {escape_controls(error)}\n"
              f"  Its remaining jobs are left pending. Fix the cause (key, model name, api_base, or wait out "
              "the rate limit) and run the same command again with --retry-errors (to resend the calls that "
              "failed).", file=err)
    counts = run.counts()
    if counts.get("call_errors"):
        print(f"{counts['call_errors']} calls in this run directory ended in an error "
              f"({counts['transient_errors']} transient: rate limit, server, timeout, connection). "
              "They are not sent again by a plain re-run; add --retry-errors to retry them.", file=err)
    if s.score_failures:
        print(f"{s.score_failures} responses could not be scored (first: {escape_controls(str(s.score_error))}); "
              "they are stored "
              f"unscored. Fix the checker and run: promptgrid score {path}", file=err)
    rows = run.results()
    found = run.adaptive() if rows else {}  # computed once (Run.adaptive caches it for report)
    if rows:
        from promptgrid.matrix.report import explain  # numpy: only once there is something to explain

        print(accuracy_table(run, rows), file=out)
        print(explain(rows, path, adaptive=list(found)), file=out)
    for model, why in s.planned.items():
        print(f"model {model}: the adaptive plan stopped before its budget: {escape_controls(why)}.", file=err)
    if found:
        from promptgrid.matrix.report._adaptive import adaptive_console

        print(adaptive_console([r.to_dict() for r in found.values()]), file=out, end="")
    return exit_code(s)


def _print_sent(s: RunSummary, path: Path, err: TextIO) -> None:
    """What a run sent: its batches, then the calls sent (or collected from batches), or that nothing was left
    to send."""
    if s.batches or s.in_batch or s.batches_live or s.batch_left:
        print(batch_note(s, path), file=err)
    if s.sent == 0 and s.stopped is None:
        if not (s.batches or s.batches_live):
            print(f"nothing to send: all {s.jobs} jobs already have results in {path} (no model calls made).", file=err)
    elif s.batch:
        print(f"{s.sent} batch results collected ({s.errors} of them errors); {s.cached} jobs answered from the store, "
              f"{s.shared} shared an identical prompt; spent ${s.spend:.4f} at the batch price.", file=err)
    else:
        rate = f", {s.calls_per_s:.1f} calls/s" if s.exec_s > 0 else ""
        print(f"{s.sent} calls sent ({s.errors} ended in an error, {s.attempts} attempts{rate}); "
              f"{s.cached} jobs answered from the store, {s.shared} shared an identical prompt; "
              f"spent ${s.spend:.4f}.", file=err)


def _print_stop(run: Run, s: RunSummary, path: Path, err: TextIO) -> None:
    """The answers a full disk sent around the store, and why the run stopped early (interrupted, max cost)."""
    spill = spill_note(s)
    if spill:
        print(spill, file=err)
    if s.stopped == "interrupted":
        print(f"interrupted: every answer received is saved in {path}. Run the same command again to resume.",
              file=err)
    elif s.stopped == "max_cost":
        limit = run.config["config"]["max_cost"]
        print(f"stopped: the run directory's spend reached --max-cost ${limit:.4f} "
              f"(now ${run.spend():.4f}). Raise --max-cost and run the same command to continue.", file=err)


def batch_note(summary: RunSummary, path: Path) -> str:
    """What a batch run did: batches created, jobs waiting in live batches, and how to collect them."""
    parts = []
    if summary.batches:
        parts.append(f"{summary.batches} batch(es) submitted with {summary.batch_jobs} calls")
    if summary.in_batch:
        parts.append(f"{summary.in_batch} jobs were already in a live batch (not sent again)")
    if summary.batch_left:
        parts.append(f"{summary.batch_left} jobs left pending: fewer than the provider takes per batch "
                     "(min_requests); run them online (without --batch) or together with more jobs")
    text = "; ".join(parts) + "." if parts else ""
    if summary.batches_live:
        text += (f" {summary.batches_live} batch(es) still running: run `promptgrid status {path}` (or the same "
                 "command) later to collect their results.")
    return text.strip()


def unsupported_note(summary: RunSummary) -> str:
    """The jobs not sent because their model cannot do their call mode, with the reasons (most jobs first)."""
    reasons = sorted(summary.unsupported_reasons.items(), key=lambda kv: -kv[1])
    shown = "; ".join(f"{escape_controls(reason)} ({n} jobs)" for reason, n in reasons[:3])
    more = f"; and {len(reasons) - 3} more reasons" if len(reasons) > 3 else ""
    return (f"{summary.unsupported} jobs not sent: their model cannot do their call mode (stored as unsupported, "
            f"left out of the accuracy): {shown}{more}.")


def spill_note(summary: RunSummary) -> str:
    """One line on the answers that went around the store because of a full disk ("" when none did).

    ``replayed``: spilled by an earlier run and stored first by this one (not
    sent again); ``spilled``: this run's answers kept in a spill file for the
    next run; ``lost``: answers neither could take (sent again next run).
    """
    parts = []
    if summary.replayed:
        parts.append(f"{summary.replayed} answer(s) an earlier run spilled on a full disk were stored first "
                     "(not sent again)")
    if summary.spilled:
        parts.append(f"{summary.spilled} answer(s) the full store could not take are kept in spill-*.jsonl "
                     "and stored by the next run")
    if summary.lost:
        parts.append(f"{summary.lost} answer(s) could not be kept anywhere and will be sent again")
    return "; ".join(parts) + "." if parts else ""


def error_summary(summary: RunSummary) -> str:
    """The failed calls of this invocation per kind, most first, with one redacted example message each."""
    head = (f"every call failed ({summary.errors} of {summary.sent})" if summary.all_failed
            else f"{summary.errors} of {summary.sent} calls failed")
    lines = [f"{head}, by kind:"]
    for kind, n in sorted(summary.error_kinds.items(), key=lambda kv: (-kv[1], kv[0])):
        example = escape_controls(summary.error_examples.get(kind, ""))
        if len(example) > 300:
            example = example[:300] + "..."
        lines.append(f"  {kind}: {n}  e.g. {example}")
    return "\n".join(lines)


def accuracy_table(run: Run, rows: Sequence[ResultRow] | None = None) -> str:
    """Accuracy per variant (rows) x model (columns) with 95% intervals, as ``Run.accuracy()`` computes it (the
    report's cells: one accuracy computation), failed calls noted, a cell whose jobs were all unsupported
    named so; "" before results. ``rows``: the run's results when the caller has them already.

    The last line pools each model's cells: correct / scored jobs over all variants.
    """
    from tabulate import tabulate

    rows = run.results() if rows is None else rows
    if not rows:
        return ""
    cells = {(a.model, a.variant_id): a for a in run.accuracy()}
    models = list(dict.fromkeys(r.model for r in rows))
    labels = {a.variant_id: a.label for a in cells.values()}
    for r in rows:  # a variant with no scored job (all unsupported) keeps its stored label
        labels.setdefault(r.variant_id, r.label or r.variant_id)
    errors = Counter((r.model, r.variant_id) for r in rows if r.status == "error")
    present = {(r.model, r.variant_id) for r in rows}
    body = []
    for vid, label in labels.items():
        line = [escape_controls(label)]
        for m in models:
            a = cells.get((m, vid))
            if a is None:
                line.append("unsupported" if (m, vid) in present else "")
                continue
            note = f", {errors[m, vid]} err" if errors[m, vid] else ""
            line.append(f"{100 * a.accuracy:.1f}% [{100 * a.ci_low:.0f}, {100 * a.ci_high:.0f}] "
                        f"({a.correct}/{a.n}{note})")
        body.append(line)
    overall = ["all variants"]
    for m in models:
        n = sum(a.n for (mm, _v), a in cells.items() if mm == m)
        ok = sum(a.correct for (mm, _v), a in cells.items() if mm == m)
        overall.append(f"{100 * ok / n:.1f}% ({ok}/{n})" if n else "")
    body.append(overall)
    return tabulate(body, headers=["variant", *[escape_controls(m) for m in models]])


def print_estimate(e: Estimate, out: TextIO) -> None:
    """The dry run's table: per model, jobs (a conversation plan: episodes), stored, shared, calls (steps) to send,
    tokens and cost."""
    from tabulate import tabulate

    conversation = e.kind == "conversation"
    jobs, cases, calls = ("episodes", "conversations", "steps") if conversation else ("jobs", "cases", "calls")
    print(f"dry run: nothing is sent. {len(e.models)} model(s) x {e.variants} variants x {e.cases} {cases} x "
          f"{e.repeats} repeat(s) = {e.jobs} {jobs}; run directory {e.run_dir}", file=out)
    lines = []
    for m in e.models:
        price = (f"${m.cost_input:.4f} input, up to ${m.cost_max:.4f} with max_tokens output"
                 if m.cost_input is not None and m.cost_max is not None else "price unknown")
        row = [m.model, m.jobs, m.stored, *(() if conversation else (m.shared,)), m.calls, m.input_tokens,
               m.output_tokens_max, price]
        if any(x.batch_cost_input is not None for x in e.models):
            row.append(f"${m.batch_cost_input:.4f} input, up to ${m.batch_cost_max:.4f}"
                       if m.batch_cost_input is not None and m.batch_cost_max is not None else "no batch price")
        lines.append(row)
    headers = ["model", jobs, "already stored", *(() if conversation else ("shared prompt",)), f"{calls} to send",
               "est. input tokens", "max output tokens", "est. cost (online)"]
    if any(x.batch_cost_input is not None for x in e.models):
        headers.append("est. cost (--batch)")
    print(tabulate(lines, headers=headers), file=out)
    _print_estimate_notes(e, jobs, calls, out)


def _print_estimate_notes(e: Estimate, jobs: str, calls: str, out: TextIO) -> None:
    """The lines under the dry run's table: adaptive plans, the totals, how a conversation plan's steps were
    counted, what would not be sent, and missing credentials."""
    for m in e.models:
        if m.product is not None:
            print(f"model {m.model}: adaptive plan of {m.jobs:,} of the product's {m.product:,} {jobs}: which cells "
                  "its rounds choose depends on their results, so its counts are the product's scaled to the "
                  "budget.", file=out)
    note = "input tokens are prompt characters / 4 (native tool schemas included); cost from litellm's price list"
    if e.unpriced:
        note += f"; no price known for {', '.join(e.unpriced)}"
    print(f"total: {e.calls} {calls} to send, est. ${e.cost_input:.4f} for their input, "
          f"at most ${e.cost_max:.4f} with max_tokens of output each ({note}).", file=out)
    if e.kind == "conversation":
        print(f"{calls} and tokens are those of the ground truth's path (played offline on {e.played:,} (variant, "
              "conversation) pair(s)): a model that solves every turn in the fewest steps. A model that errs takes "
              "more, up to --max-steps a turn; episodes already in the run directory cost nothing.", file=out)
    for m in e.models:
        if m.unsupported:
            print(f"model {m.model}: {m.unsupported} {jobs} would not be sent: it cannot do their call mode (they "
                  "are stored as unsupported and left out of the accuracy; the run says why). Constrained jobs "
                  "are sent with --constraints vllm or llama.cpp (a server given with --api-base that takes "
                  "grammars) or --constraints openai (a model that takes a JSON-schema response_format).",
                  file=out)
    for model, names in e.missing_env.items():
        print(f"model {model}: credentials not set: {', '.join(names)}. Export them before the run "
              f"(export {names[0]}=...), or give --api-base for a server that needs no key; without them "
              "its first call fails and the model is stopped.", file=out)
