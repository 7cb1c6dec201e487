"""``replay/PATH``: answers each prompt with the response stored for the same variant and case in PATH.

PATH (relative to the working directory, ``~`` expanded; ``replay//abs/path.jsonl`` for an absolute one) is
a JSONL file of either shape, line by line:

- a run's export (``promptgrid export RUN_DIR --jsonl``: ``ResultRow.to_dict`` lines, recognised by their
  ``schema_version`` or ``status`` field). A ``done`` row replays its ``response`` (a native call's stored
  envelope is replayed as text and tool calls, so the new run stores the same envelope), its token counts
  and finish reason; an ``error`` row replays a final error (see below); ``pending`` and ``unsupported``
  rows hold no answer and are skipped.
- ``promptgrid score-file`` input: ``variant_id``, ``case_id``, ``response`` (null: an empty answer), and
  optionally ``repeat`` (default 0).

The runner gives a replay client the job's ids (``JobIds``; ``takes_job_ids``): the answer is looked up by
``(variant_id, case_id)``, never by the prompt. Repeat ``k`` gets the line stored for repeat ``k``, or, when
the file has no repeat ``k`` of that pair, the lowest repeat it has. Jobs whose prompts are identical share
one call, as in every run (their original run shared it too); they get the answer stored for the job the
call was sent for.

The whole file is read and checked when the client is made, before any call (bounded reads: ``safeio``'s
line and file limits): a missing or unreadable file, a line that is not UTF-8 or JSON or nested too deep, a
missing or mistyped field, or a (variant, case, repeat) given twice with different answers stops the run
with one line naming ``PATH:LINE`` (both lines for a conflict). An export of several models holds every pair
once per model: replay reads one model's answers, so keep that model's lines.

A job with no stored answer is a final, non-retryable ``bad_request`` error naming the pair, stored for that
job; the run goes on with the others. ``bad_request`` (the request cannot be served; sending it again gives
the same answer), not ``not_found``: the runner reads ``not_found`` as an unknown model and stops sending
the model's every other call. A stored error is replayed as a final error with its stored kind when that
kind is final and concerns the call alone (bad_request, context_length, content_filter, unknown); a kind the
runner would retry, or that would stop the model (rate_limit, timeout, auth, ...), is replayed as
``unknown`` with the stored kind in the message, so a replay neither waits nor halts. Either way the job
counts as a failed call, as it did in the original run.

Cost 0 (``price`` is 0); ``input_tokens``/``output_tokens`` and ``finish_reason`` from the stored row where
present (``None`` for score-file lines); the reported model is the stored row's ``raw_model`` (else its
``model``). The latency stored is the replay's own (about 0 s), not the original's.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from promptgrid.errors import ReportError, RunError
from promptgrid.providers import ErrorKind, FatalError
from promptgrid.records import Step
from promptgrid.safeio import read_json_lines

from ._base import Completion, JobIds, Messages, OfflineClient
from ._envelope import read_envelope

__all__ = ["ReplayClient", "read_replay"]

_FINAL_KINDS = frozenset({ErrorKind.BAD_REQUEST, ErrorKind.CONTEXT_LENGTH, ErrorKind.CONTENT_FILTER,
                          ErrorKind.UNKNOWN})
"""Stored error kinds replayed as they are: final, and about this call only (no retry, no halt)."""

_SKIPPED = ("pending", "unsupported")


class _ReplayedError(FatalError):
    """A final error: never retried, whatever its kind."""

    @property
    def retryable(self) -> bool:
        return False


Stored = tuple[int, Step]
"""A stored answer (or final error, ``status`` ``error``) as a ``Step``, with the line of the file it came from."""
Answers = dict[tuple[str, str], dict[int, Stored]]
"""(variant_id, case_id) -> repeat -> (line, stored answer)."""


def read_replay(path: str | Path) -> Answers:
    """Every stored answer of ``path`` (see the module docstring); ``RunError`` naming ``PATH:LINE`` otherwise.

    Also raises ``InputLimitError`` (a line or the file over ``safeio``'s bounds, naming the file and line).
    """
    p = Path(path)
    try:
        handle = p.open("rb")
    except OSError as exc:
        raise RunError(f"replay: cannot read {p}: {exc.strerror or exc}. Give a JSONL export of a run "
                       "(promptgrid export RUN_DIR --jsonl) or lines of variant_id, case_id and response.") from None
    answers: Answers = {}
    models: dict[int, str] = {}  # line -> model, for export rows (names the models of a conflict)
    skipped = 0
    with handle:
        for line in read_json_lines(handle, name=p, objects=True):
            where = f"{p}:{line.number}"
            if line.error is not None:
                raise RunError(f"replay: {where}: {line.error}.")
            value = line.value
            if "schema_version" in value or "status" in value:
                key, stored = _export_row(value, where, line.number)
                if stored is None:
                    skipped += 1
                    continue
                models[line.number] = str(value["model"])
            else:
                key, stored = _score_line(value, where, line.number)
            repeats = answers.setdefault(key[:2], {})
            first = repeats.setdefault(key[2], stored)
            if first is not stored and not _same_answer(first[1], stored[1]):
                hint = ""
                a, b = models.get(first[0]), models.get(stored[0])
                if a is not None and b is not None and a != b:
                    hint = (f" They are answers of two models ({a[:100]!r}, {b[:100]!r}): replay reads one model's "
                            "answers, so keep that model's lines.")
                raise RunError(f"replay: {where}: variant {key[0][:200]!r}, case {key[1][:200]!r}, repeat {key[2]} "
                               f"was given at {p}:{first[0]} already, with a different answer.{hint}")
    if not answers:
        more = f" ({skipped} pending or unsupported rows, none answered)" if skipped else ""
        raise RunError(f"replay: {p} holds no answers{more}; give a JSONL export of a run (promptgrid export "
                       "RUN_DIR --jsonl) or lines of variant_id, case_id and response.")
    return answers


def _export_row(value: Mapping[str, Any], where: str, number: int) -> tuple[tuple[str, str, int], Stored | None]:
    from promptgrid.matrix.running.results import ResultRow

    try:
        row = ResultRow.from_dict(value, where=where)
    except ReportError as exc:
        raise RunError(f"replay: {exc}") from None
    key = (row.variant_id, row.case_id, row.repeat)
    if row.repeat < 0:
        raise RunError(f"replay: {where}: field 'repeat' must be 0 or more, got {row.repeat}.")
    if row.status in _SKIPPED:
        return key, None
    model = row.raw_model or row.model
    if row.status == "error":
        return key, (number, Step(status="error", error=row.error or "", error_kind=row.error_kind, raw_model=model))
    return key, (number, Step(response=row.response or "", input_tokens=row.input_tokens,
                              output_tokens=row.output_tokens, finish_reason=row.finish_reason, raw_model=model))


def _score_line(value: Mapping[str, Any], where: str, number: int) -> tuple[tuple[str, str, int], Stored]:
    ids = []
    for name in ("variant_id", "case_id"):
        field = value.get(name)
        if not isinstance(field, str) or not field:
            raise RunError(f"replay: {where}: field {name!r} is missing or not a string; each line needs "
                           "variant_id, case_id and response (score-file input), or is a row of promptgrid export.")
        ids.append(field)
    if "response" not in value:
        raise RunError(f"replay: {where}: field 'response' is missing (null is accepted: an empty answer).")
    response = value["response"]
    if response is not None and not isinstance(response, str):
        raise RunError(f"replay: {where}: field 'response' must be a string or null, got {type(response).__name__}.")
    repeat = value.get("repeat", 0)
    if repeat is None:
        repeat = 0
    if not isinstance(repeat, int) or isinstance(repeat, bool) or repeat < 0:
        raise RunError(f"replay: {where}: field 'repeat' must be an integer, 0 or more, got {repeat!r}.")
    return (ids[0], ids[1], repeat), (number, Step(response=response or ""))


class ReplayClient(OfflineClient):
    """Answers each job with the answer stored for its (variant, case, repeat) in a file; free and instant."""

    takes_job_ids = True
    """The runner passes ``job`` (``JobIds``) to ``complete``."""

    def __init__(self, name: str) -> None:
        self.name = name
        raw = name.removeprefix("replay/")
        if not raw.strip():
            raise RunError(f"model {name!r}: give the file to replay after replay/ (replay/runs/a.jsonl, "
                           "replay//abs/path.jsonl).")
        self.path = Path(raw).expanduser()
        self.answers = read_replay(self.path)

    def lookup(self, job: JobIds) -> Stored | None:
        """The stored answer for ``job``: its repeat, else the lowest repeat stored; ``None`` when the pair has none."""
        repeats = self.answers.get((job.variant_id, job.case_id))
        if not repeats:
            return None
        found = repeats.get(job.repeat)
        return found if found is not None else repeats[min(repeats)]

    async def complete(self, messages: Messages, params: Mapping[str, Any], *,
                       request: Mapping[str, Any] | None = None, job: JobIds | None = None) -> Completion:
        if job is None:
            raise FatalError(ErrorKind.BAD_REQUEST, f"{self.name} answers by variant and case id; it was called "
                                                    "without them (the runner passes them as job=JobIds(...)).")
        found = self.lookup(job)
        if found is None:
            raise FatalError(ErrorKind.BAD_REQUEST, f"{self.path} holds no answer for variant {job.variant_id!r}, "
                                                    f"case {job.case_id!r}.")
        line, stored = found
        if stored.response is None:
            kind = _kind(stored.error_kind)
            note = "" if kind.value == stored.error_kind else f" (stored kind {stored.error_kind})"
            raise _ReplayedError(kind, f"replayed error from {self.path}:{line}{note}: {stored.error}")
        text, tool_calls = stored.response, None
        if (request or {}).get("call_mode") == "native":
            unpacked = read_envelope(text)
            if unpacked is not None:
                content, calls = unpacked
                text, tool_calls = content or "", tuple(calls)
        return Completion(text=text, finish_reason=stored.finish_reason, input_tokens=stored.input_tokens,
                          output_tokens=stored.output_tokens, cost_usd=0.0, model=stored.raw_model,
                          tool_calls=tool_calls)


def _same_answer(a: Step, b: Step) -> bool:
    return (a.response, a.error, a.error_kind) == (b.response, b.error, b.error_kind)


def _kind(stored: str | None) -> ErrorKind:
    try:
        kind = ErrorKind(stored)
    except ValueError:
        return ErrorKind.UNKNOWN
    return kind if kind in _FINAL_KINDS else ErrorKind.UNKNOWN
