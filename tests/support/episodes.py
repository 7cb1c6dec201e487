"""``run_conversations``: the conversation engine run on in-memory variants and conversations, for tests.

The library runs a conversation study from a ``RunConfig`` (``pg.run``; ``running.conversation_runner.arun_episodes``
takes the config and the variants and conversations it selected). Most engine tests build their conversations
and clients in memory, so this helper turns the keywords they set into that one config: per-model keywords
(``concurrency``, ``params``/``model_params``, ``timeouts``, ``rpm``, ``tpm``) become each ``ModelSpec``'s fields,
the others the run's. Everything else (``clients``, ``renderer``, ``make_env``, ``progress``, ...) is passed on as
the engine's wiring. The only defaults of its own are the retries' (3 retries from a 0.5 s backoff instead of the
run's 5 from 1 s), which keeps the tests of failing clients short.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from promptgrid.matrix.running.config import ModelSpec, RunConfig
from promptgrid.providers import RetryPolicy

__all__ = ["CallThenProse", "conversation_config", "made_turn", "run_conversations"]


def conversation_config(models: Sequence[str], run_dir: str | Path, *, repeats: int = 1,
                        concurrency: int | Mapping[str, int] | None = None, params: Mapping[str, Any] | None = None,
                        model_params: Mapping[str, Mapping[str, Any]] | None = None,
                        timeouts: Mapping[str, float] | None = None, rpm: Mapping[str, float | None] | None = None,
                        tpm: Mapping[str, float | None] | None = None, retries: int = 3,
                        retry_policy: RetryPolicy | None = None, step_limit: int | None = None,
                        seed: int = 0, describe: Mapping[str, Any] | None = None, **run: Any) -> RunConfig:
    """The ``RunConfig`` of these keywords (the module docstring); ``run`` holds ``RunConfig`` fields as they are
    (``goal``, ``budget``, ``rounds``, ``max_cost``, ``max_jobs``, ``dedupe_requests``, ``strict_arguments``)."""
    specs = []
    for name in models:
        fields: dict[str, Any] = {"params": {**dict(params or {}), **dict((model_params or {}).get(name, {}))}}
        if concurrency is not None:
            if not isinstance(concurrency, Mapping):
                fields["concurrency"] = concurrency
            elif name in concurrency:
                fields["concurrency"] = concurrency[name]
        if timeouts and name in timeouts:
            fields["timeout"] = timeouts[name]
        for key, rates in (("rpm", rpm), ("tpm", tpm)):
            if rates and name in rates:
                fields[key] = rates[name]
        specs.append(ModelSpec(name, **fields))
    if retry_policy is not None:
        run.update(max_retries=retry_policy.max_attempts - 1, backoff_base_s=retry_policy.base,
                   backoff_max_s=retry_policy.cap, retry_after_cap=retry_policy.retry_after_cap)
    else:
        run.setdefault("max_retries", retries)
        run.setdefault("backoff_base_s", 0.5)
    if step_limit is not None:
        run["max_steps"] = step_limit
    if run.get("max_jobs") is None:
        run.pop("max_jobs", None)
    described = dict(describe or {})
    return RunConfig(grid=str(described.get("grid", "")), dataset=str(described.get("dataset", "")),
                     models=tuple(specs), run_dir=Path(run_dir), repeats=repeats, plan_seed=seed, **run)


_WIRING = ("clients", "renderer", "progress", "redactor", "batch", "batch_backends", "batch_poll_s", "export_round",
           "make_env", "env_options", "on_sent", "max_answer_chars", "retry_errors", "on_start")


def run_conversations(variants: Sequence[Any], conversations: Sequence[Any], *, models: Sequence[str],
                      run_dir: str | Path, **keywords: Any) -> Any:
    """Run the episodes of ``conversation_config(models, run_dir, ...)`` over ``variants`` and ``conversations``;
    returns the engine's ``ConversationRunSummary``."""
    from promptgrid.matrix.running.conversation_runner import arun_episodes

    wiring = {key: keywords.pop(key) for key in _WIRING if key in keywords}
    config = conversation_config(models, run_dir, **keywords)
    return asyncio.run(arun_episodes(config, variants, conversations, **wiring))


def made_turn(index: int, valid: bool, failure_mode: str | None = None, steps: int = 0, calls: int = 0) -> Any:
    """A made-up turn verdict for an ``Result`` built by hand (the reports' tests): valid, or failed with
    ``failure_mode`` (a ``TurnFailureMode`` value; default ``wrong_end_state``) and the bfcl-eval error type the
    checker gives that mode's usual cause."""
    from promptgrid.matrix.scoring.state_check import turn_verdict
    from promptgrid.matrix.scoring.verdict import ErrorCode, TurnFailureMode

    if valid:
        return turn_verdict(index, True, None, ErrorCode.VALID, {"steps": steps, "calls": calls})
    mode = TurnFailureMode(failure_mode or "wrong_end_state")
    code = {TurnFailureMode.NOT_REACHED: ErrorCode.MULTI_TURN_FORCE_TERMINATED,
            TurnFailureMode.STEP_LIMIT: ErrorCode.MULTI_TURN_FORCE_TERMINATED,
            TurnFailureMode.MISSING_CALL: ErrorCode.MULTI_TURN_EMPTY_TURN,
            TurnFailureMode.MISSING_RESULT: ErrorCode.MULTI_TURN_EXECUTION_RESPONSE_MISMATCH,
            }.get(mode, ErrorCode.MULTI_TURN_INSTANCE_STATE_MISMATCH)
    return turn_verdict(index, False, mode, code, {"steps": steps, "calls": calls})


class CallThenProse:
    """A prompt-mode conversation client (the hostile-answer tests'): each turn's first answer is ``call`` (a call
    written in Python), every later one ``prose``, which ends the turn. ``name`` is the model it stands for."""

    takes_episode = True

    def __init__(self, name: str, call: str, prose: str) -> None:
        self.name, self.call, self.prose = name, call, prose

    async def complete(self, messages: Any, params: Mapping[str, Any], *, request: Mapping[str, Any] | None = None,
                       episode: Any = None) -> Any:
        from promptgrid.matrix.clients._base import Completion

        assert episode is not None
        return Completion(self.call if episode.step == 0 else self.prose)
