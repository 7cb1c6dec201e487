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
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from promptgrid.display import escape_controls
from promptgrid.errors import RunError
from promptgrid.matrix import api
from promptgrid.matrix.api import Run
from promptgrid.matrix.running.config import RunConfig, RunOptions
from promptgrid.matrix.running.estimate import Estimate, estimate
from promptgrid.matrix.running.options import from_args
from promptgrid.matrix.running.results import ResultRow, dump_results, write_results
from promptgrid.matrix.running.session import build_config as _build_config
from promptgrid.matrix.running.session import check_run_dir, prepare
from promptgrid.matrix.running.store import RunStore
from promptgrid.safeio import check_output

if TYPE_CHECKING:  # pragma: no cover
    from promptgrid.matrix.conversations import ConversationRunSummary
    from promptgrid.matrix.running.runner import RunSummary

__all__ = ["EXIT_CALLS_FAILED", "EXIT_INTERRUPTED", "EXIT_MAX_COST", "accuracy_table", "build_config", "cmd_export",
           "cmd_run", "error_summary", "exit_code", "print_estimate", "print_run", "spill_note"]

EXIT_CALLS_FAILED = 1
"""A model halted, or every call sent ended in an error."""
EXIT_MAX_COST = 3
EXIT_INTERRUPTED = 130


def build_config(args: argparse.Namespace) -> RunConfig:
    """The ``RunConfig`` of ``promptgrid run``'s flags (over a run config file when GRID is one): built once per
    command and passed on (``api.run``, given a ``RunConfig`` and no option, derives the same one from its
    fields)."""
    return _build_config(args.grid, args.dataset, **from_args(args, RunOptions))


def cmd_run(args: argparse.Namespace) -> int:
    config = build_config(args)
    from promptgrid.matrix.conversations import is_conversation_dataset

    if is_conversation_dataset(config.dataset):
        return run_conversations_cli(config, args, sys.stdout)
    if args.dry_run:
        prep = prepare(config)
        check_run_dir(prep, append=args.append)  # the dry run says now what the run would refuse
        print_estimate(estimate(prep), sys.stdout)
        return 0
    if (args.no_wait or args.poll != 30.0) and not args.batch:
        raise RunError("--no-wait and --poll apply to a batch run: add --batch.")
    run = api.run(config, progress=not args.no_progress, retry_errors=args.retry_errors, append=args.append,
                  batch=args.batch, batch_wait=not args.no_wait, batch_poll_s=args.poll)
    assert isinstance(run, Run), "a conversation dataset was sent to run_conversations_cli above"
    return print_run(run, sys.stdout, sys.stderr)


def run_conversations_cli(config: RunConfig, args: argparse.Namespace, out: TextIO) -> int:
    """``promptgrid run`` with a conversation dataset: run (or, with ``--dry-run``, count) the episodes, print the
    summary and the report's console table. Exit codes as a single-turn run's: 3 when ``--max-cost`` stopped
    it (its unfinished episodes stored, resumed by the same command with a higher cap), else 1 when every
    episode run ended in an error or a model was stopped (an unauthorised key, an unknown model, a Retry-After
    above the cap), else 0."""
    from promptgrid.matrix.conversations import run_conversation_config

    if args.dry_run:
        _dry_run_conversations(config, out)
        return 0
    if args.no_wait:
        raise RunError("--no-wait applies to a single-turn batch run: a conversation's next step needs the answer "
                       "of this one, so a conversation run with --batch waits for each round (drop --no-wait).")
    run = run_conversation_config(config, batch=args.batch, batch_poll_s=args.poll,
                                  progress=None if args.no_progress else sys.stderr)
    s = run.summary
    failed_env = (f" ({s.environment_failures:,} ended by an environment failure)" if s.environment_failures
                  else "")
    unfinished = f", {s.unfinished:,} left unfinished by --max-cost" if s.unfinished else ""
    print(f"{s.episodes:,} episodes: {s.finished:,} finished{failed_env} ({s.skipped:,} already in the store), "
          f"{s.valid:,} valid, {s.errors:,} ended in an error{unfinished}; {s.steps_sent:,} steps sent, "
          f"{s.steps_stored:,} read back from the store; spent ${s.spend:.4f}; {s.wall_s:.1f} s. Stored in "
          f"{config.run_dir}.", file=out)
    if s.batches:
        print(f"--batch: {s.batch_rounds:,} round(s), {s.batches:,} provider batch(es); the steps sent were answered "
              "through them, at the batch price.", file=out)
    if s.stopped == "max_cost":
        print(f"stopped: the run directory's spend reached --max-cost ${s.max_cost:.4f} (now ${run.spend():.4f}); "
              f"{s.unfinished:,} episode(s) stored unfinished and {s.not_run:,} not started. Raise --max-cost and "
              "run the same command to continue.", file=sys.stderr)
    _print_episode_problems(s, out)
    if s.finished:
        out.write(run.report().console())
    for model, why in s.planned.items():
        print(f"model {escape_controls(model)}: the adaptive plan stopped before its budget: {escape_controls(why)}.",
              file=sys.stderr)
    found = run.adaptive() if s.goal is not None else {}
    if found:  # what the goal found, as a single-turn run prints it
        from promptgrid.matrix.report._adaptive import adaptive_console

        print(adaptive_console([r.to_dict() for r in found.values()]), file=out, end="")
    if s.stopped == "max_cost":
        return EXIT_MAX_COST
    return EXIT_CALLS_FAILED if s.halted or (s.errors and not s.finished) else 0


def _dry_run_conversations(config: RunConfig, out: TextIO) -> None:
    """``promptgrid run --dry-run`` with a conversation dataset: count the episodes (refused as the run would
    refuse them) and the user turns, and say what an adaptive goal would run of them."""
    from promptgrid.matrix.conversations._dataset import select_conversations
    from promptgrid.variants import load_grid

    variants = load_grid(config.grid).select(config.variants)
    conversations = select_conversations(config.dataset, cases=config.cases, limit=config.limit,
                                         bfcl_data=config.bfcl_data)
    from promptgrid.matrix.conversations._run import check_episodes, check_run_dir_kind

    check_run_dir_kind(config.run_dir)  # the dry run says now what the run would refuse
    episodes = check_episodes(len(config.models), len(variants), len(conversations), config.repeats,
                              max_jobs=config.max_jobs)
    turns = sum(len(c.turns) for c in conversations)
    print(f"{episodes:,} episodes: {len(config.models)} model(s) x {len(variants)} variant(s) x "
          f"{len(conversations)} conversation(s) x {config.repeats} repeat(s); {turns:,} user turns per "
          "model, variant and repeat, at least one model call each (a conversation's steps are known only "
          "as it runs).", file=out)
    if config.goal is not None and config.budget is not None:
        product = episodes // max(1, len(config.models))
        print(f"adaptive plan (goal {config.goal}): at most {min(config.budget, product):,} of the product's "
              f"{product:,} episodes per model; which ones its rounds choose depends on their verdicts.",
              file=out)


def _print_episode_problems(s: ConversationRunSummary, out: TextIO) -> None:
    """What went wrong in a conversation run: its first error, the models stopped and the episodes they left,
    its first environment failure."""
    errors = [r for r in s.results if r.error and not r.details.get("stopped")]
    if errors:
        print(f"first error: {escape_controls(errors[0].error or '')} (run the same command to resume)", file=out)
    for model, why in s.halted.items():  # its other episodes were not sent: unfinished, resumed by the next run
        print(f"model {escape_controls(model)} stopped: {escape_controls(why)}", file=out)
    if s.not_run and s.halted:
        print(f"{s.not_run:,} episode(s) not run because their model or the run was stopped (not stored; the same "
              "command runs them once the cause is fixed)", file=out)
    broken = [r for r in s.results if r.failure_mode == "environment_failure"]
    if broken:
        detail = str((broken[0].details.get("environment_failure") or {}).get("detail", ""))
        print(f"first environment failure: {escape_controls(detail)} (stored as failed: a rerun does not run it "
              "again)", file=out)


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
    """The dry run's table: per model, jobs, stored, shared, calls to send, tokens and cost."""
    from tabulate import tabulate

    print(f"dry run: nothing is sent. {len(e.models)} model(s) x {e.variants} variants x {e.cases} cases x "
          f"{e.repeats} repeat(s) = {e.jobs} jobs; run directory {e.run_dir}", file=out)
    lines = []
    for m in e.models:
        price = (f"${m.cost_input:.4f} input, up to ${m.cost_max:.4f} with max_tokens output"
                 if m.cost_input is not None and m.cost_max is not None else "price unknown")
        row = [m.model, m.jobs, m.stored, m.shared, m.calls, m.input_tokens, m.output_tokens_max, price]
        if any(x.batch_cost_input is not None for x in e.models):
            row.append(f"${m.batch_cost_input:.4f} input, up to ${m.batch_cost_max:.4f}"
                       if m.batch_cost_input is not None and m.batch_cost_max is not None else "no batch price")
        lines.append(row)
    headers = ["model", "jobs", "already stored", "shared prompt", "calls to send", "est. input tokens",
               "max output tokens", "est. cost (online)"]
    if any(x.batch_cost_input is not None for x in e.models):
        headers.append("est. cost (--batch)")
    print(tabulate(lines, headers=headers), file=out)
    for m in e.models:
        if m.product is not None:
            print(f"model {m.model}: adaptive plan of {m.jobs:,} of the product's {m.product:,} jobs: which cells "
                  "its rounds choose depends on their results, so its counts are the product's scaled to the "
                  "budget.", file=out)
    note = "input tokens are prompt characters / 4; cost from litellm's price list"
    if e.unpriced:
        note += f"; no price known for {', '.join(e.unpriced)}"
    print(f"total: {e.calls} calls to send, est. ${e.cost_input:.4f} for their input, "
          f"at most ${e.cost_max:.4f} with max_tokens of output each ({note}).", file=out)
    for m in e.models:
        if m.unsupported:
            print(f"model {m.model}: {m.unsupported} jobs would not be sent: it cannot do their call mode (they "
                  "are stored as unsupported and left out of the accuracy; the run says why). Constrained jobs "
                  "are sent with --constraints vllm or llama.cpp (a server given with --api-base that takes "
                  "grammars) or --constraints openai (a model that takes a JSON-schema response_format).",
                  file=out)
    for model, names in e.missing_env.items():
        print(f"model {model}: credentials not set: {', '.join(names)}. Export them before the run "
              f"(export {names[0]}=...), or give --api-base for a server that needs no key; without them "
              "its first call fails and the model is stopped.", file=out)


def export_conversations(run_dir: Path, output: str | None) -> int:
    """``promptgrid export`` of a conversation run: one JSON line per episode (``EpisodeResult.to_dict``: its
    verdict, turns, steps, tokens, cost, error), to ``output`` or standard output."""
    import json

    from promptgrid.matrix.conversations import CONVERSATION_STORE, open_conversation_run
    from promptgrid.safeio import atomic_output

    episodes = open_conversation_run(run_dir).episodes()
    lines = (json.dumps(e.to_dict(), ensure_ascii=False, default=str) + "\n" for e in episodes)
    if output:
        with atomic_output(output, inputs=[run_dir / CONVERSATION_STORE]) as fh:  # checked first; "-": stdout
            fh.writelines(lines)
        print(f"exported {len(episodes)} episodes to {output}", file=sys.stderr)
    else:
        sys.stdout.writelines(lines)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from promptgrid.matrix.conversations import is_conversation_run

    run_dir = Path(args.run_dir)
    if is_conversation_run(run_dir):
        return export_conversations(run_dir, args.output)
    with RunStore(Path(args.run_dir), readonly=True) as store:
        if args.output:
            check_output(args.output, inputs=[store.path])
            n = write_results(store.rows(), args.output)
        else:
            dump_results(store.rows(), sys.stdout)
    if args.output:
        print(f"exported {n} jobs to {args.output}", file=sys.stderr)
    return 0


def conversation_status(run_dir: Path, *, as_json: bool) -> int:
    """``promptgrid status`` of a conversation run: episodes per model (finished, valid, unfinished), the steps
    stored, and the batches in its ledger by kind and state (``--batch`` rounds, ``export-batch`` rounds).
    Nothing is polled: the run's own command (run --batch again) collects a live batch, before any episode
    plays."""
    import json

    from tabulate import tabulate

    from promptgrid.matrix.conversations import ConversationStore

    with ConversationStore(run_dir) as store:
        episodes = store.episodes()
        steps = store.step_count()
        batches = store.batches()
    rows: dict[str, list[int]] = {}
    for e in episodes:
        row = rows.setdefault(e.model, [0, 0, 0, 0])
        row[0] += 1
        row[1] += e.valid is not None
        row[2] += bool(e.valid)
        row[3] += e.valid is None
    if as_json:
        print(json.dumps({"run_dir": str(run_dir), "kind": "conversations", "steps_stored": steps,
                          "models": [dict(zip(("model", "episodes", "finished", "valid", "unfinished"),
                                              [m, *r], strict=True)) for m, r in rows.items()],
                          "batches": [{"id": b.id, "model": b.model, "kind": b.kind, "state": b.state,
                                       "provider_id": b.provider_id, "requests": b.requests} for b in batches]},
                         indent=2))
        return 0
    print(f"{run_dir}: a conversation run, {steps:,} model answers stored")
    print(tabulate([[m, *r] for m, r in rows.items()],
                   headers=["model", "episodes stored", "finished", "valid", "unfinished (resumed by run)"]))
    if batches:
        live = [b for b in batches if b.live and b.kind != "export"]
        states = ", ".join(f"{n} {state}" for state, n in sorted(Counter(b.state for b in batches).items()))
        print(f"batches: {len(batches)} ({states}); "
              + (f"{len(live)} live: run the same command with --batch to collect them and go on" if live
                 else "none live"))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """``promptgrid status RUN_DIR``: jobs per model and batches, after polling them (unless --no-poll).

    Exit code: 0 when every live batch was polled (or none was asked for); 1 when the state was printed but
    one or more batches could not be polled (their batch API down, refusing or answering garbage: one redacted
    line each on stderr; the next ``status`` polls them again); 2 when the run directory is unusable.
    """
    import json

    from promptgrid.matrix.conversations import is_conversation_run

    run_dir = Path(args.run_dir)
    if is_conversation_run(run_dir):
        return conversation_status(run_dir, as_json=args.json)
    if not (args.poll > 0 and args.poll != float("inf")):
        raise RunError(f"--poll must be a positive number of seconds, got {args.poll}.")
    st = api.status(args.run_dir, poll=not args.no_poll, wait=args.wait, poll_s=args.poll)
    if args.json:
        print(json.dumps({
            "run_dir": str(st.path), "note": st.note,
            "models": [dict(zip(("model", "jobs", "done", "errors", "pending", "unsupported"), m, strict=True))
                       for m in st.models],
            "batches": [{"id": b.id, "model": b.model, "kind": b.kind, "state": b.state,
                         "provider_id": b.provider_id, "requests": b.requests, "created_at": b.created_at,
                         "updated_at": b.updated_at, "detail": json.loads(b.detail) if b.detail else None}
                        for b in st.batches],
            "collected": None if st.collected is None else st.collected.__dict__,
            "problems": st.problems}, indent=2))
    else:
        print(status_text(st))
    for problem in st.problems:  # one redacted line per batch that could not be polled
        print(f"promptgrid: {escape_controls(problem)}", file=sys.stderr)
    return 1 if st.problems else 0


def status_text(st: Any) -> str:
    """The readable form of a ``RunStatus``: a jobs table per model, a batch table, and what to do next."""
    import json
    import time

    from tabulate import tabulate

    lines = [f"run directory {st.path}"]
    lines.append(tabulate([[escape_controls(m), *rest] for m, *rest in st.models],
                          headers=["model", "jobs", "done", "errors", "pending", "unsupported"], tablefmt="github"))
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
        lines.append(f"{len(live)} batch(es) still running: run `promptgrid status {st.path}` again later "
                     "(or with --wait).")
    return "\n".join(lines)
