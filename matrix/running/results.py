"""Results: ``Result`` (also ``ResultRow``), one (model, variant, case, repeat) of a run, whichever its kind.

One class for both kinds of run. A single-turn job's result is its flat row
as it is; a conversation's episode (``Result.episode`` builds one) is the
same row, its case the conversation, with its turn verdicts (``turns``), the
model calls it took (``steps``, ``sent``) and its ``details`` (the full
verdict, the environment's counters, the final answers). ``row()`` is the
flat row every reader of results takes (an episode's dimensions and label
filled in); ``episode_dict``/``from_episode`` are an episode's stored record.

The store yields it (``RunStore.rows``, ``RunStore.episodes``), ``promptgrid
export --jsonl`` writes it (``to_dict``: the flat row, with
``schema_version``; ``write_results``), ``report`` and ``compare`` read it
(``read_results`` for exported files), and ``Run.results()`` returns it.
Field names are those of the JSONL export; the docstring under each field is
the contract (there is no second description of it elsewhere).

Several rows can share one model call (identical prompts across variants are
sent once): they have the same ``key``; count cost and tokens once per key.

Schema versions:

- 1: this layout. Files exported before ``schema_version`` existed carry the
  same fields without it and are read as version 1.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from promptgrid.errors import OutputError, ReportError
from promptgrid.matrix.scoring.verdict import ErrorCode, TurnFailureMode, Verdict
from promptgrid.safeio import atomic_output, read_json_lines

__all__ = ["EPISODE_FIELDS", "RESULT_SCHEMA_VERSION", "ROW_FIELDS", "AccuracyRow", "Result", "ResultRow",
           "dump_results", "read_results", "turn_record", "turns_of", "unique_rows", "write_results"]

RESULT_SCHEMA_VERSION = 1

STATUSES = ("done", "error", "pending", "unsupported")


# Not slotted: the store and ``from_dict`` build rows by filling ``__dict__`` at once (``_make``),
# ~25x faster than the generated frozen ``__init__`` (one ``object.__setattr__`` per field), which
# keeps ``promptgrid export`` and the report as fast as they were with plain dicts.
@dataclass(frozen=True)
class Result:
    """One (model, variant, case, repeat) of a run and how it ended (answered and scored, failed, still pending,
    or not sendable), whichever the kind of run: a single-turn job, or a conversation's episode.

    A failure means the same in both kinds: a single-turn call, or an episode's step, that failed for good is a
    result (``status`` ``error``, ``valid`` ``False``: counted wrong, sent again only with ``--retry-errors``); one
    its model cannot be sent is ``unsupported`` (out of the rates); one the run stopped before sending is
    ``pending`` (the same command resumes it). ``scored`` and ``correct`` say how each counts in the rates.

    An episode (``episode``) is the flat row of its conversation (``case_id``; ``case_group`` its template,
    shared by its languages): ``valid`` and ``failure_mode`` the episode's, ``bfcl_error_type``/``error_code``
    those of its first failed turn, the tokens, cost and latency of all its steps, ``attempts`` its steps,
    ``n_predicted_calls`` the calls it made, ``response`` ``None`` (an episode has many answers: ``promptgrid
    render RUN_DIR`` shows them); and it has its ``turns``, ``steps``, ``sent`` and ``details``, which the flat
    row's export (``to_dict``, CSV, pandas) leaves out. Its ``error`` is also set while it is ``pending`` (where
    the run stopped); its ``row()`` then carries that in ``message``, as a pending job's row has no error.
    ``conversation_id``, ``category``, ``language`` and ``template`` are the case fields' names in a
    conversation's terms.

    ``params`` and ``dimensions`` are shared by the rows of one call or variant: read them, do
    not mutate them (``to_dict`` returns copies).
    """

    model: str
    """The model string as given (``openai/gpt-4o-mini``, ``local/smollm2-135m``)."""
    variant_id: str
    """The variant's canonical id (BFCL's query string, then any non-default extra dimension)."""
    case_id: str
    """The test case's id."""
    repeat: int = 0
    """Repeat index, 0 .. repeats-1 (pass^k needs several)."""
    key: str | None = None
    """The model call's cache key; rows of identical prompts share one call."""
    status: str = "done"
    """``done`` (answered), ``error`` (the call failed for good), ``pending`` (not sent yet) or ``unsupported``
    (never sent: the model cannot do the variant's call mode, e.g. native tools on a model without tool
    support; the reason in ``error``, ``error_kind`` ``unsupported``; left out of every rate)."""
    response: str | None = None
    """The model's answer text (``None`` unless ``status == "done"``). For a native call (``call_mode:
    native``) the JSON envelope ``{"content": text or null, "tool_calls": [{"name", "arguments"}]}``
    (``promptgrid.matrix.clients.envelope``; ``arguments`` the provider's raw string)."""
    error: str | None = None
    """Why the call failed (keys redacted), or why it was not sent (``unsupported``); ``None`` otherwise."""
    error_kind: str | None = None
    """The failure's class: rate_limit, timeout, server, auth, bad_request, context_length, ..."""
    valid: bool | None = None
    """The BFCL verdict: ``True`` correct, ``False`` wrong or failed call, ``None`` not scored."""
    error_code: str | None = None
    """Why the answer is not valid (``ErrorCode`` name, ``VALID`` when valid); ``None`` for failed calls."""
    bfcl_error_type: str | None = None
    """bfcl-eval's error type string (``simple_function_checker:wrong_func_name``); ``None`` when valid."""
    failure_mode: str | None = None
    """What the model did wrong, in the BFCL V4 blog's terms (``FailureMode`` value)."""
    format_agnostic_valid: bool | None = None
    """Would the answer be valid read in whatever format the model used?"""
    detected_format: str | None = None
    """The return format the answer is written in, ``None`` when it holds no call."""
    format_match: bool | None = None
    """ITC format match: the answer is in the requested format (``None``: free text, no call expected)."""
    function_selection_correct: bool | None = None
    """MASSIVE-Agents FSA: the called function names are the expected ones, arguments aside."""
    tool_tp: int = 0
    """ITC tool selection: true positives over function names."""
    tool_fp: int = 0
    """ITC tool selection: false positives."""
    tool_fn: int = 0
    """ITC tool selection: false negatives."""
    arg_tp: int = 0
    """ITC tool invocation: true positives over (function, parameter, value) triples."""
    arg_fp: int = 0
    """ITC tool invocation: false positives."""
    arg_fn: int = 0
    """ITC tool invocation: false negatives."""
    n_expected_calls: int = 0
    """Calls in the ground truth."""
    n_predicted_calls: int = 0
    """Calls decoded from the answer."""
    message: str = ""
    """One readable line on why the answer failed (empty when valid)."""
    response_language: str | None = None
    """Language identified in a free-text answer (no call); ``None`` otherwise."""
    language_match: bool | None = None
    """ITC language match: a free-text answer is in the query's language; ``None`` when not measured
    (the answer holds a call, or the call failed)."""
    latency_s: float | None = None
    """Seconds the successful attempt took."""
    input_tokens: int | None = None
    """Prompt tokens billed for the call."""
    output_tokens: int | None = None
    """Completion tokens billed for the call."""
    cost_usd: float | None = None
    """The call's cost in USD (litellm's price map; ``None`` when unknown)."""
    attempts: int | None = None
    """Attempts the call took (retries included)."""
    finish_reason: str | None = None
    """The provider's finish reason (``stop``, ``length``, ...)."""
    raw_model: str | None = None
    """The model name the provider reported."""
    endpoint: str | None = None
    """The ``api_base`` that answered (or last failed), credentials removed; ``None`` for a provider's default
    endpoint and for runs stored before endpoints were recorded."""
    params: Mapping[str, Any] | None = None
    """Generation parameters sent (temperature, max_tokens, seed, ...)."""
    dimensions: Mapping[str, Any] = field(default_factory=dict)
    """The variant's dimension values (``Variant.dimensions()``)."""
    label: str = ""
    """The variant's short label (BFCL figure notation, ``json->python,False``)."""
    case_language: str = "en"
    """The language of the case's query."""
    case_category: str = ""
    """simple, multiple, parallel, parallel_multiple or irrelevance."""
    case_group: str = ""
    """Shared by the translations of one case (pairs per-language results)."""
    turns: tuple[Verdict, ...] = ()
    """An episode's user turns' verdicts (a ``Verdict`` with its ``turn`` index); empty for a single-turn job and
    for an episode not scored. Not in the flat row's export."""
    steps: int = 0
    """Model calls an episode took (stored answers included); 0 for a single-turn job (see ``attempts``)."""
    sent: int = 0
    """Of ``steps``, how many were sent in the run that played the episode (the others were read back)."""
    details: Mapping[str, Any] = field(default_factory=dict)
    """An episode's ``verdict`` (the full verdict, ``ConversationVerdict.to_dict``), ``environment`` (worker
    starts, calls run, peak memory in MiB, the slowest environment step in s), ``final_answers`` (per turn, the
    first 500 characters of the answer that ended it; ``None`` when none did: force-quit, error), and why it is
    not scored: ``stopped``, ``unsupported``, ``error_kind``, ``environment_failure``. Empty for a job."""

    @property
    def conversation_id(self) -> str:
        """``case_id``: the conversation an episode plays."""
        return self.case_id

    @property
    def category(self) -> str:
        """``case_category``: a conversation's BFCL category (``multi_turn_base``, ...)."""
        return self.case_category

    @property
    def language(self) -> str:
        """``case_language``: the language of a conversation's user turns."""
        return self.case_language

    @property
    def template(self) -> str:
        """``case_group``: the id a conversation shares with its languages (reports pair languages by it)."""
        return self.case_group

    @property
    def scored(self) -> bool:
        """The result counts in the rates: it has a verdict, or its call failed (counted incorrect); never an
        ``unsupported`` (not sent) or ``pending`` one."""
        return self.status not in ("unsupported", "pending") and (self.valid is not None or self.error is not None)

    @property
    def correct(self) -> bool:
        """The answer is valid (every turn of an episode; a failed or unsupported call never is)."""
        return self.valid is True and self.error is None

    def kept(self, retry_errors: bool = False) -> bool:
        """Whether the same command keeps this result rather than playing it again: a verdict, or an error unless
        ``retry_errors`` sends it again; a ``pending`` or ``unsupported`` one is played again (it may be sent now)."""
        return self.status == "done" or (self.status == "error" and not retry_errors)

    def row(self, dimensions: Mapping[str, Any] | None = None, label: str | None = None) -> Result:
        """The flat row of this result (what ``load_results``, ``compare`` and a CSV read): a job's result is its
        own row; an episode's has the variant's ``dimensions`` and ``label`` where given (an episode stores
        neither), and a pending episode's note in ``message`` rather than ``error``."""
        changes: dict[str, Any] = {}
        if self.status == "pending" and self.error is not None:
            changes["error"] = None
        if dimensions is not None:
            changes["dimensions"] = dict(dimensions)
        if label is not None:
            changes["label"] = label
        return dataclasses.replace(self, **changes) if changes else self

    @classmethod
    def episode(cls, *, model: str, variant_id: str, conversation_id: str, category: str, repeat: int,
                valid: bool | None, failure_mode: str | None = None, turns: Sequence[Verdict] = (), steps: int = 0,
                sent: int = 0, input_tokens: int = 0, output_tokens: int = 0, cost_usd: float | None = None,
                latency_s: float = 0.0, error: str | None = None, language: str = "en", template: str = "",
                details: Mapping[str, Any] | None = None) -> Result:
        """A conversation's episode taken to its end (or as far as it went), as a ``Result``.

        ``valid`` is the entry's verdict (every turn valid); ``failure_mode`` that of the first failed turn (what
        bfcl-eval reports for the entry). ``error`` is set when a step was not answered, and the status says how
        the episode then counts, as a single-turn job in the same case does:

        - ``error``: a step's call failed for good (``details["error_kind"]``): ``valid`` is ``False``
          (counted as failed, no turn verdicts) and the same command sends it again only with
          ``retry_errors``;
        - ``pending``: the run stopped before the step was sent (``details["stopped"]``), or a store written
          before errors were results holds it: ``valid`` is ``None`` and the next run resumes it;
        - ``unsupported``: the model cannot be sent the step's request pieces (``details["unsupported"]``):
          ``valid`` is ``None``, out of every rate, and each run checks it again.
        """
        details = dict(details or {})
        if valid is None:
            status = "unsupported" if details.get("unsupported") else "pending"
        else:
            status = "error" if error is not None else "done"
        verdict = details.get("verdict")
        bfcl_error_type = verdict.get("bfcl_error_type") if isinstance(verdict, Mapping) else None
        try:
            code: str | None = ErrorCode.from_bfcl(bfcl_error_type).name if valid is not None else None
        except ValueError:  # a bfcl-eval error type this version does not know
            code = None
        error_kind = None
        if status == "error":
            kind = details.get("error_kind")
            error_kind = kind if isinstance(kind, str) else "unknown"
        elif status == "unsupported":
            error_kind = "unsupported"
        return cls(model=model, variant_id=variant_id, case_id=conversation_id, repeat=repeat, status=status,
                   error=error, error_kind=error_kind, valid=valid,
                   error_code=None if status in ("error", "unsupported") else code,
                   bfcl_error_type=None if valid else bfcl_error_type, failure_mode=failure_mode,
                   n_predicted_calls=sum(turn.n_predicted_calls for turn in turns),
                   message=(error or "") if status == "pending" else "", latency_s=latency_s,
                   input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=cost_usd, attempts=steps,
                   case_language=language, case_category=category, case_group=template, turns=tuple(turns),
                   steps=steps, sent=sent, details=details)

    def episode_fields(self) -> dict[str, Any]:
        """The arguments ``episode`` built this episode from (its stored record's fields, in their order)."""
        return {"model": self.model, "variant_id": self.variant_id, "conversation_id": self.case_id,
                "category": self.case_category, "repeat": self.repeat, "valid": self.valid,
                "failure_mode": self.failure_mode, "turns": self.turns, "steps": self.steps, "sent": self.sent,
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "cost_usd": self.cost_usd,
                "latency_s": self.latency_s, "error": self.error, "language": self.case_language,
                "template": self.case_group, "details": self.details}

    def episode_with(self, **changes: Any) -> Result:
        """This episode with ``changes`` to the fields ``episode`` takes, and what follows from them (status, the
        flat row's error fields) made again: ``dataclasses.replace`` would keep them as they were."""
        return Result.episode(**{**self.episode_fields(), **changes})

    def episode_dict(self) -> dict[str, Any]:
        """An episode as the store keeps it and ``promptgrid export`` writes it (JSON-safe; ``from_episode`` reads
        it back): ``episode_fields`` with each turn as ``turn_record`` gives it."""
        out = self.episode_fields()
        out["turns"] = [turn_record(turn) for turn in self.turns]
        out["details"] = dict(self.details)
        return out

    @classmethod
    def from_episode(cls, data: Mapping[str, Any]) -> Result:
        """The episode ``episode_dict`` wrote. Raises ``TypeError`` (an unknown field, as a newer version might
        write, a missing one, or a field of the wrong type) or ``ValueError``: the store turns either into a
        ``StoreError`` naming the row."""
        if not isinstance(data, Mapping):
            raise TypeError(f"an episode is an object, not {type(data).__name__}")
        fields = dict(data)
        unknown = set(fields) - set(EPISODE_FIELDS)
        if unknown:
            shown = ", ".join(repr(str(name)[:40]) for name in sorted(map(str, unknown))[:3])
            raise TypeError(f"unknown fields ({shown})")
        missing = [name for name in _EPISODE_REQUIRED if name not in fields]
        if missing:
            raise TypeError(f"missing fields ({', '.join(missing)})")
        turns = data.get("turns", ())
        if not isinstance(turns, (list, tuple)) or not all(isinstance(turn, Mapping) for turn in turns):
            raise TypeError("turns must be a list of objects")
        details = data.get("details") or {}
        if not isinstance(details, Mapping):
            raise TypeError("details must be an object")
        for name, kinds in _EPISODE_TYPES.items():
            value = fields.get(name, _EPISODE_DEFAULTS.get(name))
            if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
                raise TypeError(f"{name} is {type(value).__name__}")
        fields["turns"] = turns_of(turns, details.get("verdict"))
        fields["details"] = dict(details)
        return cls.episode(**fields)

    @classmethod
    def _make(cls, values: dict[str, Any]) -> ResultRow:
        """A row from a dict naming every field in declaration order (no checks; see the class comment)."""
        row = object.__new__(cls)
        row.__dict__.update(values)
        return row

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict with ``schema_version`` first (one JSONL export line)."""
        # __dict__ holds exactly the fields, in declaration order (``__init__`` and ``_make`` both fill it so).
        out: dict[str, Any] = {"schema_version": RESULT_SCHEMA_VERSION, **self.__dict__}
        for name in _EPISODE_ONLY:  # an episode's own parts: its stored record (``episode_dict``) has them
            del out[name]
        if out["params"] is not None:
            out["params"] = dict(out["params"])
        out["dimensions"] = dict(out["dimensions"])
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "row") -> ResultRow:
        """Read one exported row; unknown keys are ignored, wrong types raise ``ReportError`` naming ``where``.

        A missing ``status`` is ``error`` when ``error`` is set, else ``done``.
        """
        if not isinstance(data, Mapping):
            raise ReportError(f"{where}: expected a JSON object, got {type(data).__name__}.")
        version = data.get("schema_version", RESULT_SCHEMA_VERSION)
        if version != RESULT_SCHEMA_VERSION or isinstance(version, bool):
            raise ReportError(f"{where}: schema_version {version!r} is not supported (this promptgrid reads "
                              f"{RESULT_SCHEMA_VERSION}); export the run again with this version.")
        _check_required(data, where)
        values: dict[str, Any] = {}
        for name, (check, expected) in _CHECKS.items():
            value = data.get(name)
            if value is None:
                value = _DEFAULTS[name]() if name in _DEFAULTS else None
            elif check(value):
                if expected == "a number":
                    value = float(value)
            else:
                raise ReportError(f"{where}: field {name!r} must be {expected}, got {json.dumps(value)[:60]}.")
            values[name] = value
        values.update(turns=(), steps=0, sent=0, details={})  # not in an exported row
        if data.get("status") is None:
            values["status"] = "error" if values["error"] is not None else "done"
        elif values["status"] not in STATUSES:
            raise ReportError(f"{where}: field 'status' is {values['status']!r}, not one of {', '.join(STATUSES)}.")
        return cls._make(values)


ResultRow = Result
"""``Result`` by the name it had as the single-turn flat row (the store, the export, ``compare`` and the reports
read it so); one class."""


_REQUIRED = ("model", "variant_id", "case_id")


def _check_required(data: Mapping[str, Any], where: str) -> None:
    """Raise ``ReportError`` naming the first of ``_REQUIRED`` that the row lacks or has empty."""
    for name in _REQUIRED:
        value = data.get(name)
        if not isinstance(value, str) or not value:
            raise ReportError(f"{where}: field {name!r} is missing or empty (got {json.dumps(value)[:60]}); "
                              f"every row needs {', '.join(_REQUIRED)}, as `promptgrid export --jsonl` writes.")


def _default(f: dataclasses.Field[Any]) -> Callable[[], Any]:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory
    return lambda: f.default


_EPISODE_ONLY = ("turns", "steps", "sent", "details")
"""An episode's own fields: not in the flat row's export (``to_dict``), CSV or single-turn pandas frame."""
ROW_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Result) if f.name not in _EPISODE_ONLY)
"""The flat row's fields, in order: the ``export --jsonl`` keys after ``schema_version``."""

_DEFAULTS: dict[str, Callable[[], Any]] = {
    f.name: _default(f) for f in dataclasses.fields(Result) if f.name in ROW_FIELDS and f.name not in _REQUIRED
}

_TYPE_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "str": (lambda v: isinstance(v, str), "a string"),
    "bool": (lambda v: isinstance(v, bool), "true, false or null"),
    "int": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "float": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v), "a number"),
    "Mapping[str, Any]": (lambda v: isinstance(v, Mapping), "an object"),
}
# Each field's check, from its declared type (``X | None`` accepts null too: every field may be
# missing or null in a file and then takes its default).
_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    f.name: _TYPE_CHECKS[str(f.type).removesuffix(" | None")] for f in dataclasses.fields(Result)
    if f.name in ROW_FIELDS
}


def read_results(path: str | Path) -> list[ResultRow]:
    """Rows of an exported JSONL file (``promptgrid export --jsonl``); errors name the file and line."""
    p = Path(path)
    try:
        handle = p.open("rb")
    except OSError as exc:
        raise ReportError(f"cannot read {p}: {exc.strerror or exc}.") from None
    rows: list[ResultRow] = []
    numbers: list[int] = []
    with handle:
        for line in read_json_lines(handle):
            where = f"{p}:{line.number}"
            if line.error is not None:
                raise ReportError(f"{where}: {line.error}.")
            rows.append(ResultRow.from_dict(line.value, where=where))
            numbers.append(line.number)
    if not rows:
        raise ReportError(f"{p} holds no rows; export a run with `promptgrid export RUN_DIR --jsonl`.")
    return unique_rows(rows, lambda i: f"{p}:{numbers[i]}")


def unique_rows(rows: list[ResultRow], where: Callable[[int], str]) -> list[ResultRow]:
    """``rows`` with each job once: a row repeated exactly (an export concatenated twice, ``cat a b``) is
    counted once, so a report or a comparison never counts a job twice; two rows of the same job (model,
    variant, case, repeat) with different contents raise ``ReportError`` naming both (``where(i)``: the
    ``i``-th row's file:line), since which of them is the result cannot be known and merging them would
    silently change the numbers."""
    first: dict[tuple[str, str, str, int], int] = {}
    out: list[ResultRow] = []
    for i, row in enumerate(rows):
        job = (row.model, row.variant_id, row.case_id, row.repeat)
        seen = first.setdefault(job, i)
        if seen == i:
            out.append(row)
        elif rows[seen] != row:
            raise ReportError(
                f"{where(i)}: a second row for model {row.model[:200]!r}, variant {row.variant_id[:200]!r}, case "
                f"{row.case_id[:200]!r}, repeat {row.repeat} that differs from the first at {where(seen)}. Keep one "
                "of them (export the run again: promptgrid export RUN_DIR --output FILE), or compare the two "
                "exports with promptgrid compare.")
    return out


def dump_results(rows: Iterable[ResultRow], out: IO[str]) -> int:
    """Write rows as JSONL (``to_dict`` per line) to a text stream; returns how many were written."""
    n = 0
    dumps = json.dumps
    for row in rows:
        out.write(dumps(row.to_dict(), ensure_ascii=False) + "\n")
        n += 1
    return n


def write_results(rows: Iterable[ResultRow], path: str | Path) -> int:
    """Write rows as a JSONL file; returns how many were written.

    Written to a temporary file beside ``path`` and renamed over it when
    complete, so a failure never leaves half a file (nor truncates the input
    when ``path`` is the file the rows are read from).
    """
    try:
        with atomic_output(path) as out:
            return dump_results(rows, out)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}.") from None


@dataclass(frozen=True, slots=True)
class AccuracyRow:
    """Accuracy of one model on one variant, with its 95% interval (as the report computes it)."""

    model: str
    variant_id: str
    label: str
    """The variant's short label (``json->python,False``)."""
    n: int
    """Scored results: jobs answered and scored or failed (counted as incorrect); finished episodes."""
    correct: int
    accuracy: float
    ci_low: float
    """Lower end of the 95% interval: Wilson over results without repeats, cluster bootstrap over cases with
    them (single-turn); Wilson over a conversation run's finished episodes."""
    ci_high: float


# A conversation's episode: one (model, variant, conversation, repeat), its turn verdicts and its totals.

TURN_RECORD_FIELDS = ("index", "valid", "failure_mode", "steps", "calls")
"""What the episode record keeps of each turn (``turn_record``); its ``details["verdict"]`` keeps the rest."""


def turn_record(turn: Verdict) -> dict[str, Any]:
    """One turn as the episode record keeps it: its index, validity, ``TurnFailureMode`` value (``None`` when
    valid), and the model steps and calls it took."""
    return {"index": turn.turn, "valid": turn.valid,
            "failure_mode": None if turn.failure_mode is None else turn.failure_mode.value,
            "steps": int((turn.details or {}).get("steps", 0)), "calls": turn.n_predicted_calls}


def turns_of(records: Sequence[Mapping[str, Any]], verdict: Any) -> tuple[Verdict, ...]:
    """The turn verdicts of a stored episode: each turn's record, with its bfcl error type and details from the
    stored verdict (``details["verdict"]["turns"]``, written with it). ``TypeError``/``ValueError`` for records
    that do not fit it."""
    if not records:
        return ()
    stored = verdict.get("turns") if isinstance(verdict, Mapping) else None
    if not isinstance(stored, list) or len(stored) != len(records):
        raise TypeError("the turns do not match the stored verdict's (details.verdict.turns)")
    out = []
    for record, full in zip(records, stored, strict=True):
        unknown = set(record) - set(TURN_RECORD_FIELDS)
        if unknown:
            shown = ", ".join(repr(name[:40]) for name in sorted(unknown)[:3])  # a stored name may be anything
            raise TypeError(f"a turn has unknown fields ({shown}{', ...' if len(unknown) > 3 else ''})")
        if not isinstance(full, Mapping) or full.get("turn") != record.get("index"):
            raise TypeError(f"turn {record.get('index')!r} is not the stored verdict's")
        index, valid, calls = record.get("index"), record.get("valid"), record.get("calls", 0)
        details = full.get("details") or {}
        if not isinstance(index, int) or not isinstance(valid, bool) or not isinstance(calls, int) \
                or not isinstance(details, Mapping):
            raise TypeError(f"turn {index!r}: index, valid, calls or details of the wrong type")
        mode = record.get("failure_mode")
        out.append(Verdict(valid, ErrorCode.from_bfcl(full.get("bfcl_error_type")),
                           None if mode is None else TurnFailureMode(mode), n_predicted_calls=calls, turn=index,
                           details=dict(details)))
    return tuple(out)


EPISODE_FIELDS = ("model", "variant_id", "conversation_id", "category", "repeat", "valid", "failure_mode", "turns",
                   "steps", "sent", "input_tokens", "output_tokens", "cost_usd", "latency_s", "error", "language",
                   "template", "details")
"""An episode's stored record, in its order (``Result.episode_fields``)."""
_EPISODE_REQUIRED = ("model", "variant_id", "conversation_id", "category", "repeat", "valid")
_EPISODE_DEFAULTS: dict[str, Any] = {"failure_mode": None, "steps": 0, "sent": 0, "input_tokens": 0,
                                     "output_tokens": 0, "cost_usd": None, "latency_s": 0.0, "error": None,
                                     "language": "en", "template": ""}
_EPISODE_TYPES: dict[str, tuple[type, ...]] = {
    "model": (str,), "variant_id": (str,), "conversation_id": (str,), "category": (str,), "repeat": (int,),
    "valid": (bool, type(None)), "failure_mode": (str, type(None)), "steps": (int,), "sent": (int,),
    "input_tokens": (int,), "output_tokens": (int,), "cost_usd": (int, float, type(None)),
    "latency_s": (int, float), "error": (str, type(None)), "language": (str,), "template": (str,),
}
"""The fields of a stored episode whose type the reports rely on (``from_episode`` checks them)."""
