"""What a conversation run stores per episode, and what its reports read.

An *episode* is one (model, variant, conversation, repeat): the model is
taken through every user turn of the conversation, step by step, against a
fresh environment. ``EpisodeResult`` is its outcome as plain data (the
conversation store keeps it as JSON; ``Run.episodes`` returns them); its
``turns`` are the turn verdicts (``Verdict`` with a ``turn`` index).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from promptgrid.matrix.scoring.verdict import ErrorCode, TurnFailureMode, Verdict

if TYPE_CHECKING:  # pragma: no cover - types only
    from promptgrid.matrix.running.results import ResultRow

__all__ = ["EpisodeResult", "turn_record", "turns_of"]

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


@dataclass(frozen=True)
class EpisodeResult:
    """One (model, variant, conversation, repeat) taken to its end and scored.

    ``valid`` is the entry's verdict (every turn valid). ``failure_mode`` is
    that of the first failed turn (what bfcl-eval reports for the entry).
    ``error`` is set, and ``valid`` is ``None``, when the episode could not be
    finished (a call kept failing, the run was stopped): such an episode is
    not scored and a later run of the same command resumes it.
    """

    model: str
    variant_id: str
    conversation_id: str
    category: str
    repeat: int
    valid: bool | None
    failure_mode: str | None = None
    turns: tuple[Verdict, ...] = ()
    """Each user turn's verdict (a ``Verdict`` with its ``turn`` index); empty for an episode not scored."""
    steps: int = 0
    """Model calls the episode took (stored answers included)."""
    sent: int = 0
    """Of ``steps``, how many were sent in this run (the others were read back from the store)."""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    latency_s: float = 0.0
    error: str | None = None
    language: str = "en"
    """The language of the conversation's user turns (``Conversation.language``)."""
    template: str = ""
    """The id shared by the conversation's languages (``Conversation.template``): reports pair languages by it."""
    details: Mapping[str, Any] = field(default_factory=dict)
    """``verdict``: the full verdict (``ConversationVerdict.to_dict``); ``environment``: worker starts, calls run,
    peak memory (MiB) and the slowest environment step (s); ``final_answers``: per turn, the first 500
    characters of the answer that ended it (``None`` when no answer did: force-quit, error)."""

    @property
    def case_id(self) -> str:
        """``conversation_id``: the case an episode plays, under the name a single-turn result gives it."""
        return self.conversation_id

    def row(self, dimensions: Mapping[str, Any] | None = None, label: str = "") -> ResultRow:
        """The episode as one flat ``ResultRow`` (what ``load_results``, ``compare`` and a CSV read): its case is
        the conversation (``case_group`` its template, shared by its languages), ``valid`` and ``failure_mode``
        the episode's, ``bfcl_error_type``/``error_code`` those of its first failed turn, the tokens, cost and
        latency of all its steps, ``n_predicted_calls`` the calls it made. An unfinished episode (``valid``
        ``None``: stopped, or a call kept failing) is ``pending``, its error in ``message``: it is resumed, not
        scored, as the conversation report counts it. ``response`` is ``None``: an episode has many answers
        (``promptgrid render RUN_DIR`` shows them)."""
        from promptgrid.matrix.running.results import ResultRow
        from promptgrid.matrix.scoring.verdict import ErrorCode

        verdict = self.details.get("verdict") if isinstance(self.details.get("verdict"), Mapping) else {}
        bfcl_error_type = verdict.get("bfcl_error_type") if isinstance(verdict, Mapping) else None
        try:
            code: str | None = ErrorCode.from_bfcl(bfcl_error_type).name if self.valid is not None else None
        except ValueError:  # a bfcl-eval error type this version does not know
            code = None
        return ResultRow(
            model=self.model, variant_id=self.variant_id, case_id=self.conversation_id, repeat=self.repeat,
            status="pending" if self.valid is None else "done", valid=self.valid, error_code=code,
            bfcl_error_type=None if self.valid else bfcl_error_type, failure_mode=self.failure_mode,
            n_predicted_calls=sum(turn.n_predicted_calls for turn in self.turns),
            message=(self.error or "") if self.valid is None else "",
            latency_s=self.latency_s, input_tokens=self.input_tokens, output_tokens=self.output_tokens,
            cost_usd=self.cost_usd, attempts=self.steps, dimensions=dict(dimensions or {}), label=label,
            case_language=self.language, case_category=self.category, case_group=self.template)

    def to_dict(self) -> dict[str, Any]:
        # Not dataclasses.asdict(self): that deep-copies ``details`` (the whole verdict), only to be replaced by
        # the shallow copy below; the fields are read as they are instead (the same JSON).
        out = {name: getattr(self, name) for name in _FIELD_NAMES}
        out["turns"] = [turn_record(turn) for turn in self.turns]
        out["details"] = dict(self.details)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EpisodeResult:
        """The record ``to_dict`` wrote. Raises ``TypeError`` (an unknown field, as a newer version might write,
        or a field of the wrong type) or ``ValueError``: the store turns either into a ``StoreError`` naming the
        row."""
        if not isinstance(data, Mapping):
            raise TypeError(f"an episode is an object, not {type(data).__name__}")
        fields = dict(data)
        turns = data.get("turns", ())
        if not isinstance(turns, (list, tuple)) or not all(isinstance(turn, Mapping) for turn in turns):
            raise TypeError("turns must be a list of objects")
        details = data.get("details") or {}
        if not isinstance(details, Mapping):
            raise TypeError("details must be an object")
        fields["turns"] = turns_of(turns, details.get("verdict"))
        fields["details"] = dict(details)
        result = cls(**fields)
        for name, kinds in _FIELD_TYPES.items():
            value = getattr(result, name)
            if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
                raise TypeError(f"{name} is {type(value).__name__}")
        return result


_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "model": (str,), "variant_id": (str,), "conversation_id": (str,), "category": (str,), "repeat": (int,),
    "valid": (bool, type(None)), "failure_mode": (str, type(None)), "steps": (int,), "sent": (int,),
    "input_tokens": (int,), "output_tokens": (int,), "cost_usd": (int, float, type(None)),
    "latency_s": (int, float), "error": (str, type(None)), "language": (str,), "template": (str,),
}
"""The fields of a stored episode whose type the reports rely on (``from_dict`` checks them)."""

_FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in fields(EpisodeResult))
