"""A conversation run's episodes as they happened: ``promptgrid render RUN_DIR`` and ``promptgrid export RUN_DIR``.

The store keeps every answer, not the calls' outputs (``_store``); an
episode's transcript is rebuilt from it as a resumed run rebuilds it
(``_transcript``: the stored answers, the calls they decode to run again on a
fresh ``Environment``, which is deterministic, for their outputs), so nothing
is sent to any model and the store is only read. Here:

- ``select_episodes`` picks episodes by model, variant (id or label),
  conversation and repeat; ``iter_transcripts`` rebuilds them a group at a
  time;
- ``transcript_text``: one as text for a terminal (``render RUN_DIR``), every
  control character escaped; ``transcript_record``: one as JSON-ready data;
- ``export_records``: the lines of ``export RUN_DIR``, each the stored
  ``Result.episode_dict()`` (its fields unchanged) plus ``transcript``
  (``transcript_record`` without the system prompts). A transcript that cannot
  be rebuilt whole (the dataset or grid changed or cannot be read, the run was
  given generation parameters: see ``_transcript``) has ``complete`` false
  and a ``note`` saying why; the line is written anyway;
- ``json_line``: a record as one line of JSON that is safe to print: the
  characters a terminal acts on that JSON leaves raw (DEL, the C1 controls,
  bidirectional overrides, line and paragraph separators) are written as
  ``\\uXXXX`` escapes, so the data is the same once parsed.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from promptgrid.display import escape_controls
from promptgrid.errors import RunError, closest
from promptgrid.matrix.datasets._conversations import Conversation
from promptgrid.matrix.report._conversations import episode_failure_mode
from promptgrid.matrix.running.results import Result

if TYPE_CHECKING:  # pragma: no cover - types only
    from promptgrid.matrix.report._transcripts import EpisodeTranscript, TranscriptStep

__all__ = ["TRANSCRIPT_CHUNK", "export_records", "iter_transcripts", "json_line", "select_episodes",
           "transcript_record", "transcript_text"]

_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""What ``json.dumps(ensure_ascii=False)`` leaves raw that a terminal acts on (C0 controls it escapes itself)."""


def json_line(record: Mapping[str, Any]) -> str:
    """``record`` as one line of JSON (with its newline), non-ASCII text kept readable but every character a
    terminal acts on escaped as ``\\uXXXX`` (model text may hold ANSI sequences or bidi overrides)."""
    text = json.dumps(record, ensure_ascii=False, default=str)
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n"


def export_records(run_dir: str | os.PathLike[str], episodes: Sequence[Result] | None = None, *,
                   conversations: Sequence[Conversation] | None = None,
                   model_params: Mapping[str, Mapping[str, Any]] | None = None,
                   bfcl_data: str | os.PathLike[str] | None = None) -> Iterator[dict[str, Any]]:
    """The export line of each of ``episodes`` (default: every stored episode, in the store's order) of the
    conversation run in ``run_dir``: ``Result.episode_dict()`` plus ``transcript`` (module docstring), made
    as they are iterated (``iter_transcripts``, whose other arguments these are). Raises ``RunError`` /
    ``StoreError`` when ``run_dir`` holds no readable conversation store (read at the first line when
    ``episodes`` is not given, so nothing is yielded from a damaged one)."""
    from promptgrid.matrix.running.store import conversation_store

    if episodes is None:
        with conversation_store(run_dir) as store:
            episodes = store.episodes()
    for transcript in iter_transcripts(run_dir, episodes, conversations=conversations, model_params=model_params,
                                       bfcl_data=bfcl_data):
        yield {**transcript.episode.episode_dict(), "transcript": transcript_record(transcript, system=False)}


def select_episodes(episodes: Sequence[Any], *, models: Sequence[str] = (), variants: Sequence[str] = (),
                    cases: Sequence[str] = (), repeats: Sequence[int] = (), labels: Mapping[str, str] | None = None,
                    limit: int | None = None, case_noun: str = "conversation") -> list[Any]:
    """The episodes of ``episodes`` that every given filter keeps, in their order, at most ``limit``.

    ``models``: model strings; ``variants``: variant ids or their labels (``labels``: id -> label, as the run
    recorded them); ``cases``: conversation ids; ``repeats``: repeat indices. An empty filter keeps all. Raises
    ``RunError`` for a value no episode has (naming the closest, so a typo is not an empty answer), for a
    ``limit`` below 0, and when the filters together keep nothing. Any results with ``model``, ``variant_id``,
    ``case_id`` and ``repeat`` are chosen alike (a single-turn run's ``ResultRow``s: ``case_noun`` "case").
    """
    if limit is not None and limit < 0:
        raise RunError(f"the number of episodes must be 0 or more, not {limit}.")
    wanted_variants = _wanted_variants(episodes, variants, dict(labels or {}))
    _check_present(episodes, models, cases, repeats, case_noun)
    chosen = [e for e in episodes
              if (not models or e.model in models) and (not wanted_variants or e.variant_id in wanted_variants)
              and (not cases or e.case_id in cases) and (not repeats or e.repeat in repeats)]
    if not chosen and episodes and (models or variants or cases or repeats):
        raise RunError(f"no episode of this run has the given models, variants, {case_noun}s and repeats together "
                       "(each one alone has some).")
    return chosen if limit is None else chosen[:limit]


def _wanted_variants(episodes: Sequence[Any], variants: Sequence[str], labels: Mapping[str, str]
                     ) -> set[str]:
    """The variant ids that ``variants`` (ids or labels) name among the episodes'; ``RunError`` for one that names
    none."""
    present_variants = sorted({e.variant_id for e in episodes})
    by_label: dict[str, set[str]] = {}
    for vid in present_variants:
        by_label.setdefault(labels.get(vid, vid), set()).add(vid)
    wanted_variants: set[str] = set()
    for given in variants:
        if given in present_variants:
            wanted_variants.add(given)
        elif given in by_label:
            wanted_variants |= by_label[given]
        else:
            hint = closest(given, [*by_label, *present_variants])
            raise RunError(f"no episode of variant {given!r} in this run.{hint} Give a variant id or label the run "
                           "has (promptgrid report RUN_DIR lists them).")
    return wanted_variants


def _check_present(episodes: Sequence[Any], models: Sequence[str], cases: Sequence[str],
                   repeats: Sequence[int], case_noun: str) -> None:
    """``RunError`` for a model, conversation or repeat that no episode has."""
    for what, given_values, present in (("model", models, {e.model for e in episodes}),
                                        (case_noun, cases, {e.case_id for e in episodes})):
        for given in given_values:
            if given not in present:
                raise RunError(f"no episode of {what} {given!r} in this run.{closest(given, sorted(present))} "
                               f"Give a {what} the run has (promptgrid export RUN_DIR lists its episodes).")
    have_repeats = {e.repeat for e in episodes}
    for repeat in repeats:
        if repeat not in have_repeats:
            raise RunError(f"no episode with repeat {repeat} in this run (its repeats: "
                           f"{', '.join(map(str, sorted(have_repeats))) or 'none'}).")


TRANSCRIPT_CHUNK = 256
"""Episodes rebuilt at a time by ``iter_transcripts`` (each group reads the dataset and builds the renderer once;
only one group's transcripts are held in memory)."""


def iter_transcripts(run_dir: str | os.PathLike[str], episodes: Sequence[Result], *,
                     conversations: Sequence[Conversation] | None = None,
                     model_params: Mapping[str, Mapping[str, Any]] | None = None,
                     bfcl_data: str | os.PathLike[str] | None = None,
                     labels: Mapping[str, str] | None = None) -> Iterator[EpisodeTranscript]:
    """The transcript of each of ``episodes`` of the run in ``run_dir``, in their order, rebuilt from its store
    ``TRANSCRIPT_CHUNK`` episodes at a time (``_transcript.episode_transcripts``, whose arguments these are:
    nothing is sent to a model; the calls are run again on a fresh ``Environment`` for their outputs, which the
    store does not keep). What one episode lacks is its transcript's ``note``; ``RunError`` / ``StoreError``
    when ``run_dir`` holds no readable conversation store."""
    from promptgrid.matrix.report._transcripts import episode_transcripts

    for start in range(0, len(episodes), TRANSCRIPT_CHUNK):
        yield from episode_transcripts(run_dir, episodes[start:start + TRANSCRIPT_CHUNK], model_params=model_params,
                                       conversations=conversations, bfcl_data=bfcl_data, labels=labels)


def transcript_record(transcript: EpisodeTranscript, *, system: bool = True) -> dict[str, Any]:
    """``transcript`` as JSON-ready data (the ``transcript`` field of ``promptgrid export``'s lines and of
    ``promptgrid render RUN_DIR --jsonl``; docs/conversations.md).

    ``{"complete": bool, "note": str, "turns": [turn, ...]}``; ``complete`` is false, and ``note`` says why,
    when the rebuild stopped early (the turns after that point are absent, or have no steps). A turn:
    ``turn`` (index), ``reached`` (false for a turn the episode never got to), ``messages`` (those that opened
    it: turn 0's whole first prompt; ``system=False`` leaves out the system messages, the long part that the
    variant's template makes), ``steps`` and ``verdict`` (the stored ``TurnVerdict.to_dict()``, or ``None``).
    A step: ``step`` (index), ``answer`` (the model's answer as stored: redacted and bounded as the run stored
    it; native: the message text), ``tool_calls`` (native: the calls as the model wrote them,
    ``name(arguments)``), ``calls`` (the calls it decoded to, each ``{"call", "output", "refused"}``: the text
    the model got back, and the ``Refusal`` value of a call the environment did not run), ``decode_error``
    (an answer that tried to call and could not be read), ``ends_turn`` and ``latency_s``. Text is as
    stored, not escaped: a writer that shows it in a terminal escapes it (``transcript_text``, ``json_line``).
    """
    turns = []
    for turn in transcript.turns:
        messages = [dict(m) for m in turn.messages if system or m.get("role") != "system"]
        steps = [{"step": s.index, "answer": s.answer, "tool_calls": list(s.tool_calls),
                  "calls": [{"call": c.call, "output": c.output, "refused": c.refused} for c in s.calls],
                  "decode_error": s.decode_error, "ends_turn": s.ends_turn, "latency_s": s.latency_s}
                 for s in turn.steps]
        turns.append({"turn": turn.index, "reached": turn.reached, "messages": messages, "steps": steps,
                      "verdict": None if turn.verdict is None else dict(turn.verdict)})
    return {"complete": not transcript.note, "note": transcript.note, "turns": turns}


def transcript_text(transcript: EpisodeTranscript, *, system: bool = False) -> str:
    """``transcript`` as readable text for a terminal (``promptgrid render RUN_DIR``), every control character
    written as a visible escape (``escape_controls``: model text cannot move the cursor, recolour or rewrite
    what the terminal shows).

    A header line (conversation, model, variant, repeat, the episode's verdict), the episode's error or
    environment failure if any; then per user turn the messages that opened it (the system prompt as one
    line with its size unless ``system``), each step's answer, the calls it decoded to with their outputs (or
    why the answer could not be decoded), and the turn's stored verdict (valid, or the failure mode with the
    state differences, expected calls not made and calls beyond them, refused calls). A transcript that stops
    early ends with its ``note``.
    """
    e = transcript.episode
    lines = [f"=== {e.conversation_id} | {e.model} | {transcript.label} | {e.variant_id} | repeat {e.repeat} | "
             f"{'unsupported' if e.status == 'unsupported' else _status(e.valid, episode_failure_mode(e))}"]
    if e.error:
        lines.append(f"--- error: {e.error}")
    failure = e.details.get("environment_failure")
    if isinstance(failure, Mapping):
        lines.append(f"--- environment failure: {failure.get('detail')}")
    for turn in transcript.turns:
        lines.append(f"## turn {turn.index}" + ("" if turn.reached else ": not reached (the episode ended before it)"))
        for message in turn.messages:
            role, text = str(message.get("role", "")), _content(message)
            if role == "system" and not system:
                lines.append(f"--- system: {len(text):,} characters, not shown (promptgrid render GRID --dataset DS "
                             f"--case {e.conversation_id} prints the prompt)")
            else:
                lines += [f"--- {role}", text]
        for step in turn.steps:
            lines += _step_lines(step)
        if turn.verdict is not None:
            lines += _verdict_lines(turn.index, turn.verdict)
    if transcript.note:
        lines.append(f"--- the transcript stops here: {transcript.note}")
    return escape_controls("\n".join(lines)) + "\n"


def _step_lines(step: TranscriptStep) -> list[str]:
    """A transcript step's lines: its answer, its tool calls as written, the calls it decoded to with their
    outputs, and why it could not be decoded."""
    lines = [f"--- step {step.index}: answer" + (" (ends the turn)" if step.ends_turn else ""),
             step.answer if step.answer else "(empty)"]
    lines += [f"    tool call as written: {call}" for call in step.tool_calls]
    for call in step.calls:
        refused = f"  [refused: {call.refused}]" if call.refused else ""
        lines.append(f"    call:   {call.call}{refused}")
        lines.append("    output: " + call.output.replace("\n", "\n            "))
    if step.decode_error:
        lines.append(f"    could not be decoded: {step.decode_error}")
    return lines


def _status(valid: bool | None, failure_mode: str | None) -> str:
    if valid is None:
        return "unfinished"
    return "valid" if valid else f"failed: {failure_mode or 'unknown'}"


def _content(message: Mapping[str, Any]) -> str:
    """A message's text (content that is not a string as JSON); a native assistant message's tool calls after it."""
    content = message.get("content")
    text = "" if content is None else content if isinstance(content, str) else json.dumps(
        content, ensure_ascii=False, default=str)
    if message.get("tool_calls"):
        text += ("\n" if text else "") + json.dumps(message["tool_calls"], ensure_ascii=False, default=str)
    if message.get("tool_call_id"):
        text = f"[{message['tool_call_id']}] {text}"
    return text


def _verdict_lines(index: int, verdict: Mapping[str, Any]) -> list[str]:
    """The stored verdict of turn ``index``: its status, then what its details say beyond it."""
    from promptgrid.matrix.scoring.state_check import TurnFailureMode

    valid = verdict.get("valid") if isinstance(verdict.get("valid"), bool) else None
    mode = verdict.get("failure_mode")
    status = _status(valid, mode if isinstance(mode, str) else None)
    try:
        status += f" ({TurnFailureMode(mode).description})" if isinstance(mode, str) else ""
    except ValueError:  # a mode this version does not know (a newer store): shown as it is
        pass
    lines = [f"--- turn {index} verdict: {status}"]
    details = verdict.get("details")
    if not isinstance(details, Mapping):
        return lines
    diffs = details.get("state_differences")
    if isinstance(diffs, Mapping) and diffs:
        lines.append("    state differences (the model's environment against the ground truth's):")
        lines += _difference_lines(diffs)
    for key, title in (("missing_calls", "expected calls not made"), ("extra_calls", "calls beyond the expected"),
                       ("missing_results", "expected results not obtained")):
        found = details.get(key)
        if isinstance(found, list) and found:
            lines.append(f"    {title}:")
            lines += [f"      {_value(x)}" for x in found]
    refused = details.get("refused")
    if isinstance(refused, list) and refused:
        lines.append("    refused calls:")
        lines += [f"      {r.get('call')}: {r.get('reason')}" for r in refused if isinstance(r, Mapping)]
    other = details.get("argument_rule_disagrees")
    if isinstance(other, Mapping):
        verdict_text = "valid" if other.get("valid") else f"failed ({other.get('failure_mode')})"
        lines.append(f"    the {other.get('other_rule')} argument rule scores this turn {verdict_text}")
    return lines


def _difference_lines(diffs: Mapping[str, Any]) -> list[str]:
    """A verdict's state differences, one line per attribute that differs (entries of another shape skipped)."""
    lines = []
    for cls, attributes in diffs.items():
        for name, found in (attributes.items() if isinstance(attributes, Mapping) else ()):
            for d in found if isinstance(found, list) else ():
                if isinstance(d, Mapping):
                    lines.append(f"      {cls}.{d.get('path', name)}: model {_value(d.get('model'))}, "
                                 f"ground truth {_value(d.get('ground_truth'))}")
    return lines


def _value(value: Any) -> str:
    """A value of a verdict's details on one line: a call as written, ``<absent>`` as it is, any other value as
    its Python ``repr`` (so ``'2000'`` and ``2000`` differ)."""
    text = value if isinstance(value, str) and (value == "<absent>" or "(" in value) else repr(value)
    return text.replace("\n", "\\n")
