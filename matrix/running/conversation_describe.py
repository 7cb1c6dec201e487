"""What a conversation run did, in words: the lines ``promptgrid run`` prints for one and its exit code.

The conversation kind's ``print_run`` and ``dry_run`` (``promptgrid.matrix.episodes``); the single-turn
counterparts are ``promptgrid.matrix.running.describe``. They write to the streams they are given.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TextIO

from promptgrid.display import escape_controls

if TYPE_CHECKING:  # pragma: no cover - types only
    from promptgrid.matrix.episodes._run import Run
    from promptgrid.matrix.running.config import RunConfig
    from promptgrid.matrix.running.conversation_runner import ConversationRunSummary
    from promptgrid.matrix.running.estimate import PlanEstimate

__all__ = ["conversation_plan", "dry_run_conversations", "estimate_conversation_config", "print_conversation_run"]


def print_conversation_run(run: Run, out: TextIO, err: TextIO) -> int:
    """Say what a conversation run just did (episodes finished, valid, ended in an error; steps sent and read back;
    spend; batch rounds; why it stopped) and print its report's console table and what an adaptive goal found.
    Exit codes as a single-turn run's: 130 when Ctrl-C or SIGTERM stopped it, 3 when ``--max-cost`` stopped it
    (its unfinished episodes stored, resumed by the same command with a higher cap), else 1 when every episode
    this run played ended in an error or a model was stopped (an unauthorised key, an unknown model, a Retry-After
    above the cap), else 0."""
    from promptgrid.matrix.running.describe import EXIT_CALLS_FAILED, EXIT_INTERRUPTED, EXIT_MAX_COST

    s = run.summary
    failed_env = (f" ({s.environment_failures:,} ended by an environment failure)" if s.environment_failures
                  else "")
    unfinished = f", {s.unfinished:,} left unfinished by --max-cost" if s.unfinished else ""
    unsupported = (f", {s.unsupported:,} not sent: their model cannot do their call mode (left out of the accuracy)"
                   if s.unsupported else "")
    print(f"{s.episodes:,} episodes: {s.finished:,} finished{failed_env} ({s.skipped:,} already in the store), "
          f"{s.valid:,} valid, {s.errors:,} ended in an error (counted as failed){unfinished}{unsupported}; "
          f"{s.steps_sent + s.steps_failed:,} steps sent{_failed_steps(s)}, "
          f"{s.steps_stored:,} read back from the store; spent ${s.spend:.4f}; {s.wall_s:.1f} s. Stored in "
          f"{run.path}.", file=out)
    if s.replayed:
        print(f"{s.replayed:,} answer(s) an earlier run spilled on a full disk were stored first (not sent again).",
              file=out)
    if s.batches:
        print(f"--batch: {s.batch_rounds:,} round(s), {s.batches:,} provider batch(es); the steps sent were answered "
              "through them, at the batch price.", file=out)
    if s.stopped == "max_cost":
        print(f"stopped: the run directory's spend reached --max-cost ${s.max_cost:.4f} (now ${run.spend():.4f}); "
              f"{s.unfinished:,} episode(s) stored unfinished and {s.not_run:,} not started. Raise --max-cost and "
              "run the same command to continue.", file=err)
    if s.stopped == "interrupted":
        print(f"interrupted: every answer received is saved in {run.path}; the episodes under way and "
              f"{s.not_run:,} not started are left for the next run. Run the same command again to resume.",
              file=err)
    _print_episode_problems(s, out)
    if s.finished:
        out.write(run.report().console())
    for model, why in s.planned.items():
        print(f"model {escape_controls(model)}: the adaptive plan stopped before its budget: {escape_controls(why)}.",
              file=err)
    found = run.adaptive() if s.goal is not None else {}
    if found:  # what the goal found, as a single-turn run prints it
        from promptgrid.matrix.report._adaptive import adaptive_console

        print(adaptive_console([r.to_dict() for r in found.values()]), file=out, end="")
    if s.stopped == "interrupted":
        return EXIT_INTERRUPTED
    if s.stopped == "max_cost":
        return EXIT_MAX_COST
    played, played_errors = s.finished - s.skipped, s.errors - s.errors_stored
    return EXIT_CALLS_FAILED if s.halted or (played > 0 and played_errors == played) else 0


def conversation_plan(config: RunConfig) -> tuple[Any, Any, Any, int]:
    """What a conversation run of ``config`` would play, loaded and checked as the run checks it (``RunError`` for
    a directory of the other kind, or a plan past ``max_jobs``): the variants, the conversations, the renderer and
    the number of episodes."""
    from promptgrid.matrix.datasets._conversations import select_conversations
    from promptgrid.matrix.episodes._guard import check_run_dir_kind
    from promptgrid.matrix.running.conversation_runner import check_episodes
    from promptgrid.matrix.running.session import make_renderer
    from promptgrid.variants import load_grid

    grid = load_grid(config.grid)
    variants = grid.select(config.variants)
    conversations = select_conversations(config.dataset, cases=config.cases, limit=config.limit,
                                         bfcl_data=config.bfcl_data)
    check_run_dir_kind(config.run_dir, "conversation")  # the dry run says now what the run would refuse
    episodes = check_episodes(len(config.models), len(variants), len(conversations), config.repeats,
                              max_jobs=config.max_jobs)
    renderer = make_renderer(variants, template_dir=grid.template_dir, translation_store=config.translation_store,
                             bfcl_data=config.bfcl_data)
    return variants, conversations, renderer, episodes


def estimate_conversation_config(config: RunConfig) -> PlanEstimate:
    """``pg.estimate`` of a conversation dataset: ``estimate_conversations`` of what ``config`` would play."""
    from promptgrid.matrix.running.estimate import estimate_conversations

    variants, conversations, renderer, _episodes = conversation_plan(config)
    return estimate_conversations(config, variants, conversations, renderer)


def dry_run_conversations(config: RunConfig, *, append: bool, out: TextIO) -> None:
    """``promptgrid run --dry-run`` with a conversation dataset: count the episodes (refused as the run would
    refuse them) and the user turns, and print what they would send and cost (``estimate_conversations``: the
    single-turn dry run's table, in episodes and steps), with what an adaptive goal would run of them."""
    from promptgrid.matrix.running.describe import print_estimate
    from promptgrid.matrix.running.estimate import estimate_conversations

    variants, conversations, renderer, episodes = conversation_plan(config)
    turns = sum(len(c.turns) for c in conversations)
    print(f"{episodes:,} episodes: {len(config.models)} model(s) x {len(variants)} variant(s) x "
          f"{len(conversations)} conversation(s) x {config.repeats} repeat(s); {turns:,} user turns per "
          "model, variant and repeat, at least one model call each.", file=out)
    if config.goal is not None and config.budget is not None:
        product = episodes // max(1, len(config.models))
        print(f"adaptive plan (goal {config.goal}): at most {min(config.budget, product):,} of the product's "
              f"{product:,} episodes per model; which ones its rounds choose depends on their verdicts.",
              file=out)
    print_estimate(estimate_conversations(config, variants, conversations, renderer), out)


def _failed_steps(s: ConversationRunSummary) -> str:
    """What the summary line adds to the steps sent when some failed or took retries, as a single-turn run's line
    says of its calls ("12 steps sent (1 ended in an error, 15 attempts)"); nothing otherwise."""
    sent = s.steps_sent + s.steps_failed
    if not s.steps_failed and s.attempts <= sent:
        return ""
    return f" ({s.steps_failed:,} ended in an error, {s.attempts:,} attempts)"


def _print_episode_problems(s: ConversationRunSummary, out: TextIO) -> None:
    """What went wrong in a conversation run: its first error, the models stopped and the episodes they left,
    its first environment failure."""
    errors = [r for r in s.results if r.status == "error"]
    if errors:
        print(f"first error: {escape_controls(errors[0].error or '')}", file=out)
        print(f"{len(errors):,} episode(s) ended in an error: stored and counted as failed, as a failed single-turn "
              "call is. A plain re-run does not play them again; add --retry-errors to send their failed step again "
              "(their stored steps are read back).", file=out)
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
