"""Scoring bfcl-eval's multi-turn result lines offline (``promptgrid score-file --dataset bfcl:multi_turn_base``).

bfcl-eval writes one line per entry, ``{"id": "multi_turn_base_0", "result":
[[step, ...], ...]}``: per user turn, the model's answers step by step. A
step is what the model said at that step:

- a string (a prompting model's answer): decoded in the prompt's return
  format (``--variant``; bfcl-eval's default prompt is Python calls without a
  tag) with promptgrid's strict parser, the one single-turn scoring uses, so
  nothing is ``eval``-ed; a Python call's positional arguments are kept
  (``sort('report.pdf')``) and bound by the environment, by the method's
  signature, as bfcl-eval's ``eval`` of the string binds them;
- a list of ``{name: arguments}`` objects (a function-calling model), the
  arguments an object or a JSON string of one.

A step that cannot be decoded is a ``DecodeFailure`` (bfcl-eval drops it
silently; promptgrid records it in the turn's details), an empty step has no
calls. The trajectory is then scored by ``check_conversation`` and the line
written back with the verdict's fields added: ``valid``, ``failure_mode``,
``bfcl_error_type`` and ``turns`` (each turn's verdict). A line that cannot be
scored (not an object, no ``id`` of the dataset, ``result`` not a list of
turns, more turns than the conversation) or whose environment cannot go on
(``EnvironmentFailure``: a state beyond the bounds, a replay that differs, the
episode's environment time spent) is reported as ``NAME:LINE`` and left out;
the others are scored.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, Any

from promptgrid.matrix.datasets._conversations import Conversation
from promptgrid.matrix.episodes._environment import EnvironmentFailure, ToolCall, decoded_call
from promptgrid.matrix.scoring.state_check import MAXIMUM_STEP_LIMIT, DecodedStep, DecodeFailure
from promptgrid.safeio import read_json_lines

__all__ = ["decode_step", "score_conversation_stream"]

_SHOWN = 200  # characters of an undecodable answer kept in the verdict


class _LineError(Exception):
    pass


def decode_step(step: Any, *, return_format: str = "python", tool_call_tag: bool = False) -> DecodedStep:
    """One step of a bfcl-eval result as the calls it holds, or a ``DecodeFailure`` saying why not."""
    if isinstance(step, str):
        from promptgrid.matrix.scoring.parse import parse_response

        parsed = parse_response(step, return_format, tool_call_tag, positional=True)
        if parsed.failure is not None:
            return DecodeFailure(step[:_SHOWN], parsed.details or str(parsed.failure))
        return tuple(decoded_call(name, args) for call in parsed.calls or () for name, args in call.items())
    if isinstance(step, list):
        calls = []
        for item in step:
            if not (isinstance(item, dict) and len(item) == 1):
                return DecodeFailure(json.dumps(step)[:_SHOWN], "a function call must be one {name: arguments} object")
            ((name, args),) = item.items()
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError as exc:
                    return DecodeFailure(json.dumps(step)[:_SHOWN], f"the arguments of {name} are not JSON: {exc}")
            if not isinstance(args, dict):
                return DecodeFailure(json.dumps(step)[:_SHOWN], f"the arguments of {name} are not an object")
            calls.append(ToolCall(str(name), args))
        return tuple(calls)
    return DecodeFailure(repr(step)[:_SHOWN], f"a step must be a string or a list of calls, not {type(step).__name__}")


_MEMO_ENTRIES = 4096  # decoded answer texts kept per stream
_MEMO_CHARS = 4096  # the longest text kept


def _trajectory(result: Any, conversation: Conversation, return_format: str, tool_call_tag: bool,
                memo: dict[str, DecodedStep] | None = None) -> list[list[DecodedStep]]:
    """The line's steps decoded. ``memo`` keeps the decoding of short answer texts for the stream: models repeat
    the same text across entries (above all a closing sentence at each turn's end), and a text always decodes the
    same way (the decoded calls are never changed: the environment copies what it sends)."""
    if not isinstance(result, list) or not all(isinstance(turn, list) for turn in result):
        raise _LineError('"result" must be a list of turns, each a list of steps')
    if len(result) > len(conversation.ground_truth):
        raise _LineError(f'"result" has {len(result)} turns; {conversation.id} has {len(conversation.ground_truth)}')

    def decoded(step: Any) -> DecodedStep:
        if memo is None or not isinstance(step, str) or len(step) > _MEMO_CHARS:
            return decode_step(step, return_format=return_format, tool_call_tag=tool_call_tag)
        found = memo.get(step)
        if found is None:
            found = decode_step(step, return_format=return_format, tool_call_tag=tool_call_tag)
            if len(memo) < _MEMO_ENTRIES:
                memo[step] = found
        return found

    return [[decoded(step) for step in turn] for turn in result]


SCORING_THREADS = 8
"""Lines scored at a time. Scoring a line is mostly waiting on its environments' worker processes (which run on
the other cores), so several threads overlap that waiting; the lines are written in input order. Measured on 2
cores (``benchmarks/multi_turn_score.py``): 8 threads keep both cores busier than 4 (about 6% less wall time) and
12 gain nothing more."""


def score_conversation_stream(source: Iterable[bytes] | Iterable[str], sink: IO[str], *, name: str,
                              conversations: Sequence[Conversation], errors: IO[str], return_format: str = "python",
                              tool_call_tag: bool = False, strict_arguments: bool = False,
                              threads: int = SCORING_THREADS) -> tuple[int, int, int]:
    """Score every line of ``source`` into ``sink``; returns (scored, valid, failed lines).

    Lines are read with ``promptgrid.safeio.read_json_lines`` (bounded) and
    scored ``threads`` at a time, written in input order. Each entry's ground
    truth is run once, however many lines name it. ``strict_arguments``
    chooses the argument rule (``check_conversation``); each scored line
    records it (``argument_rule``).
    """
    from promptgrid.matrix.episodes._conversation_play import StateScorer

    by_id: Mapping[str, Conversation] = {c.id: c for c in conversations}
    memo: dict[str, DecodedStep] = {}
    # A run's scorer (the ``Scorer`` of conversations): each entry's ground truth is run once, shared by its lines.
    scorer = StateScorer(step_limit=MAXIMUM_STEP_LIMIT, strict_arguments=strict_arguments)

    def score(line: Any) -> tuple[int, dict[str, Any] | None, Any, str | None]:
        try:
            if line.error is not None:
                raise _LineError(line.error)
            record = line.value
            entry = record.get("id", record.get("case_id"))
            conversation = by_id.get(entry) if isinstance(entry, str) else None
            if conversation is None:
                raise _LineError(f"id {entry!r} is not an entry of the dataset")
            trajectory = _trajectory(record.get("result", record.get("response")), conversation, return_format,
                                     tool_call_tag, memo)
            verdict = scorer.score(trajectory, conversation)
        except (_LineError, EnvironmentFailure) as exc:
            # An environment that cannot go on (a state beyond the bounds, a replay that differs, the episode's
            # environment time spent) costs this line only, as a malformed line does.
            what = f"the environment could not score it ({exc.reason}): " if isinstance(exc, EnvironmentFailure) else ""
            return line.number, None, None, f"{what}{str(exc).rstrip('.')}"
        return line.number, record, verdict, None

    scored = valid = failed = 0

    def emit(done: tuple[int, dict[str, Any] | None, Any, str | None]) -> None:
        nonlocal scored, valid, failed
        number, record, verdict, problem = done
        if problem is not None or record is None:
            failed += 1
            print(f"promptgrid: {name}:{number}: {problem}; line skipped.", file=errors)
            return
        out = dict(record)
        out.update(verdict.to_dict())
        sink.write(json.dumps(out, ensure_ascii=False) + "\n")
        scored += 1
        valid += verdict.valid

    with ThreadPoolExecutor(max(1, threads), thread_name_prefix="score-file") as pool:
        pending: deque[Future[tuple[int, dict[str, Any] | None, Any, str | None]]] = deque()
        for line in read_json_lines(source, objects=True):
            pending.append(pool.submit(score, line))
            while len(pending) > 2 * threads:
                emit(pending.popleft().result())
        while pending:
            emit(pending.popleft().result())
    return scored, valid, failed
