"""The result of scoring one response: ``ErrorCode``, ``FailureMode`` and the frozen ``Verdict``.

``ErrorCode`` maps one-to-one onto the ``error_type`` strings bfcl-eval
2026.3.23 writes into its score files (``ast_checker.py``, ``eval_runner.py``,
the multi-turn and agentic checkers), plus ``VALID``. Keeping bfcl-eval's
spelling as the enum *value* lets a promptgrid result file be joined with a
bfcl-eval score file on ``bfcl_error_type`` without a translation table. The
multi-turn and agentic codes are never produced by promptgrid (it scores
single-turn AST categories only); they are listed so that every string found
in a bfcl-eval score file has a member.

``FailureMode`` says what the model did wrong (``failure_modes.classify``
chooses it); ``TurnFailureMode`` says it of a conversation turn
(``scoring.state_check`` chooses it). The two vocabularies of failure live
here, in one module.

A ``Verdict`` carries, besides validity, everything the metrics need (FSA,
tool-selection and tool-invocation counts, format match, language match), so
reports never have to re-parse a response. It scores a case or one turn of a
conversation: a conversation's verdict has its ``turns`` (each a verdict with
its ``turn`` index, ``TurnFailureMode`` for its failure mode, ``details`` on
what it did), and is valid when every turn is.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ErrorCode", "FailureMode", "TurnFailureMode", "Verdict"]


class ErrorCode(enum.Enum):
    """Why a response is not valid, spelled as bfcl-eval spells it (``VALID`` if it is)."""

    VALID = "valid"

    # Decoding (eval_runner._evaluate_single_ast_entry / _evaluate_single_relevance_entry).
    DECODER_FAILED = "ast_decoder:decoder_failed"
    DECODER_WRONG_OUTPUT_FORMAT = "ast_decoder:decoder_wrong_output_format"
    IRRELEVANCE_DECODER_SUCCESS = "irrelevance_error:decoder_success"
    RELEVANCE_DECODER_FAILED = "relevance_error:decoder_failed"

    # Call-level checks (ast_checker.py).
    SIMPLE_WRONG_COUNT = "simple_function_checker:wrong_count"
    SIMPLE_UNCLEAR = "simple_function_checker:unclear"
    WRONG_FUNC_NAME = "simple_function_checker:wrong_func_name"
    MISSING_REQUIRED = "simple_function_checker:missing_required"
    UNEXPECTED_PARAM = "simple_function_checker:unexpected_param"
    MISSING_OPTIONAL = "simple_function_checker:missing_optional"
    PARALLEL_WRONG_COUNT = "parallel_function_checker_no_order:wrong_count"
    PARALLEL_NO_MATCH = "parallel_function_checker_no_order:cannot_find_match"
    PARALLEL_ORDERED_WRONG_COUNT = "parallel_function_checker_enforce_order:wrong_count"
    MULTIPLE_WRONG_COUNT = "multiple_function_checker:wrong_count"

    # Parameter-level checks (ast_checker.py).
    TYPE_ERROR_SIMPLE = "type_error:simple"
    TYPE_ERROR_NESTED = "type_error:nested"
    TYPE_ERROR_JAVA = "type_error:java"
    TYPE_ERROR_JS = "type_error:js"
    VALUE_ERROR_STRING = "value_error:string"
    VALUE_ERROR_LIST = "value_error:list/tuple"
    VALUE_ERROR_DICT_KEY = "value_error:dict_key"
    VALUE_ERROR_DICT_VALUE = "value_error:dict_value"
    VALUE_ERROR_LIST_DICT_COUNT = "value_error:list_dict_count"
    VALUE_ERROR_OTHERS = "value_error:others"
    DICT_CHECKER_UNCLEAR = "dict_checker:unclear"
    LIST_DICT_CHECKER_UNCLEAR = "list_dict_checker:unclear"

    # Multi-turn and agentic (never produced by promptgrid; for joining bfcl-eval files).
    MULTI_TURN_EMPTY_TURN = "multi_turn:empty_turn_model_response"
    MULTI_TURN_IRRELEVANCE_DECODER_SUCCESS = "multi_turn:irrelevance_error:decoder_success"
    MULTI_TURN_INSTANCE_STATE_MISMATCH = "multi_turn:instance_state_mismatch"
    MULTI_TURN_EXECUTION_RESPONSE_MISMATCH = "multi_turn:execution_response_mismatch"
    MULTI_TURN_METHOD_INVOKE_ORDER_MISMATCH = "multi_turn:method_invoke_order_mismatch"
    MULTI_TURN_INFERENCE_ERROR = "multi_turn:inference_error"
    MULTI_TURN_FORCE_TERMINATED = "multi_turn:force_terminated"
    AGENTIC_ANSWER_NOT_FOUND = "agentic:answer_not_found"
    AGENTIC_NO_LAST_MESSAGE = "agentic:no_last_message"
    AGENTIC_INFERENCE_ERROR = "agentic:inference_error"

    @property
    def bfcl_error_type(self) -> str | None:
        """bfcl-eval's ``error_type`` string; ``None`` for ``VALID`` (bfcl-eval writes none)."""
        return None if self is ErrorCode.VALID else self.value

    @classmethod
    def from_bfcl(cls, error_type: str | None) -> ErrorCode:
        """The member for a bfcl-eval ``error_type`` string (``None`` means valid)."""
        if error_type is None:
            return cls.VALID
        return cls(error_type)


class FailureMode(enum.Enum):
    """What the model did wrong; ``.description`` is a short sentence for reports."""

    CALL_WHEN_NONE_EXPECTED = "call_when_none_expected"
    NO_CALL = "no_call"
    PROSE_INSTEAD_OF_CALL = "prose_instead_of_call"
    PER_CALL_TOOLCALL_WRAPPING = "per_call_toolcall_wrapping"
    PER_CALL_FUNCTIONS_WRAPPING = "per_call_functions_wrapping"
    PER_CALL_LIST_WRAPPING = "per_call_list_wrapping"
    TAG_MISSING = "tag_missing"
    UNEXPECTED_TAG = "unexpected_tag"
    OTHER_FORMAT = "other_format"
    UNCLOSED_TAG = "unclosed_tag"
    TRUNCATED = "truncated"
    BAD_ESCAPING = "bad_escaping"
    CODE_FENCE = "code_fence"
    PROSE_AROUND_CALL = "prose_around_call"
    WRONG_XML_TYPE_NAMES = "wrong_xml_type_names"
    MALFORMED_CALL = "malformed_call"
    BAD_TOOL_ARGUMENTS = "bad_tool_arguments"
    HALLUCINATED_FUNCTION = "hallucinated_function"
    WRONG_COUNT = "wrong_count"
    WRONG_FUNCTION = "wrong_function"
    MISSING_PARAMETER = "missing_parameter"
    UNKNOWN_PARAMETER = "unknown_parameter"
    WRONG_TYPE = "wrong_type"
    WRONG_VALUE = "wrong_value"

    @property
    def description(self) -> str:
        return _DESCRIPTIONS[self]


class TurnFailureMode(enum.Enum):
    """Why a conversation turn failed, in terms of what the model did (``FailureMode`` says it of a single-turn
    answer); the precedence is in ``scoring.state_check``'s docstring."""

    STEP_LIMIT = "step_limit"
    NOT_REACHED = "not_reached"
    IRRELEVANCE_VIOLATED = "irrelevance_violated"
    DECODE_FAILURE = "decode_failure"
    CALL_REFUSED = "call_refused"
    MISSING_CALL = "missing_call"
    EXTRA_STATE_CHANGE = "extra_state_change"
    WRONG_END_STATE = "wrong_end_state"
    MISSING_RESULT = "missing_result"
    ENVIRONMENT_FAILURE = "environment_failure"
    """Not the model's doing: the episode's environment could not go on (``EnvironmentFailure``); set by the
    runner on the episode, never by ``check_conversation``."""

    @property
    def description(self) -> str:
        """A short sentence for reports."""
        return _TURN_DESCRIPTIONS[self]


_TURN_DESCRIPTIONS = {
    TurnFailureMode.STEP_LIMIT: "kept calling past the step limit, so the turn was force-quit",
    TurnFailureMode.NOT_REACHED: "never reached this turn (the conversation was force-quit earlier)",
    TurnFailureMode.IRRELEVANCE_VIOLATED: "called a function in a turn that cannot be done with what is offered",
    TurnFailureMode.DECODE_FAILURE: "gave an answer mid-turn that could not be decoded, which ended the turn",
    TurnFailureMode.CALL_REFUSED: "made a call the environment refused (unknown method, invalid arguments, bounds)",
    TurnFailureMode.MISSING_CALL: "made no call although the turn needs some",
    TurnFailureMode.EXTRA_STATE_CHANGE: "made every expected call, and another that changed the state",
    TurnFailureMode.WRONG_END_STATE: "left the environment in another state than the expected calls do",
    TurnFailureMode.MISSING_RESULT: "did not obtain a result the expected calls obtain",
    TurnFailureMode.ENVIRONMENT_FAILURE: "the episode's environment could not go on (a bound, a failed "
                                         "worker), so the episode ended there",
}


_DESCRIPTIONS = {
    FailureMode.CALL_WHEN_NONE_EXPECTED: "called a function although none applies (irrelevance)",
    FailureMode.NO_CALL: "made no call (empty answer or empty call list) although one was expected",
    FailureMode.PROSE_INSTEAD_OF_CALL: "answered in prose instead of calling a function",
    FailureMode.PER_CALL_TOOLCALL_WRAPPING: "wrapped each call in its own <TOOLCALL> block",
    FailureMode.PER_CALL_FUNCTIONS_WRAPPING: "wrapped each call in its own <functions> block",
    FailureMode.PER_CALL_LIST_WRAPPING: "wrote each call as its own JSON array or Python list",
    FailureMode.TAG_MISSING: "did not put the calls inside <TOOLCALL>...</TOOLCALL> as asked",
    FailureMode.UNEXPECTED_TAG: "put the calls in <TOOLCALL> tags although none were asked for",
    FailureMode.OTHER_FORMAT: "answered in another return format than the one asked for",
    FailureMode.UNCLOSED_TAG: "left a tag or bracket unclosed, so the call does not parse",
    FailureMode.TRUNCATED: ("stopped mid-call (inside a string, bracket, code fence or <functions> block), "
                            "as an answer cut at the token limit does"),
    FailureMode.BAD_ESCAPING: "escaped quotes wrongly (e.g. \\\" inside JSON or XML), so the call does not parse",
    FailureMode.CODE_FENCE: "put the calls in a Markdown code fence the format does not allow",
    FailureMode.PROSE_AROUND_CALL: "put text around the call, which the requested format does not allow",
    FailureMode.WRONG_XML_TYPE_NAMES: "used type names outside the allowed set in XML (e.g. int for integer)",
    FailureMode.MALFORMED_CALL: "wrote call syntax that does not parse in the requested format",
    FailureMode.HALLUCINATED_FUNCTION: "called a function that was not offered",
    FailureMode.WRONG_COUNT: "made the wrong number of calls",
    FailureMode.WRONG_FUNCTION: "called an offered function, but not the expected one",
    FailureMode.MISSING_PARAMETER: "left out a parameter the answer needs",
    FailureMode.UNKNOWN_PARAMETER: "passed a parameter the function does not take or the answer does not allow",
    FailureMode.WRONG_TYPE: "passed a value of the wrong type",
    FailureMode.WRONG_VALUE: "passed a wrong value",
    FailureMode.BAD_TOOL_ARGUMENTS: "sent native tool-call arguments that are not a valid JSON object",
}

@dataclass(frozen=True, init=False)
class Verdict:
    """How one response scored against one case under one variant; or one turn, or a whole conversation.

    A conversation is scored turn by turn (``conversations.check_conversation``): each turn gets a verdict
    with its ``turn`` index, a ``TurnFailureMode`` when it failed, its bfcl-eval ``error_code`` and its
    ``details``; the conversation's verdict holds them in ``turns`` and takes the ``error_code`` and
    ``failure_mode`` of the first failed turn (what bfcl-eval reports for the entry). The fields below
    ``n_predicted_calls`` (a turn: the calls it made) are a single-turn answer's.

    Fields beyond validity (all derived from the same parse, never re-parsed):

    - ``format_agnostic_valid``: would the response be valid had it been parsed
      in whatever format the model actually used (``parse_any``)?
    - ``detected_format``: the return format the response is written in
      (python, json, verbose_xml, concise_xml) or ``None`` when no call was found.
    - ``format_match`` (ITC FM): the response is in the requested format,
      tool-call tag included; ``None`` when the response holds no call and
      none was expected (free text is the right answer then).
    - ``function_selection_correct`` (MASSIVE-Agents FSA): the multiset of
      called function names equals the expected one, arguments aside.
    - ``tool_tp/fp/fn`` (ITC tool selection) over function names and
      ``arg_tp/fp/fn`` (ITC tool invocation) over (name, key, value) triples.
    - ``response_language`` / ``language_match`` (ITC LM): only for responses
      that hold no call (free-text answers); ``None`` otherwise.
    """

    valid: bool
    error_code: ErrorCode
    failure_mode: FailureMode | TurnFailureMode | None = None
    format_agnostic_valid: bool = False
    detected_format: str | None = None
    format_match: bool | None = None
    function_selection_correct: bool = False
    tool_tp: int = 0
    tool_fp: int = 0
    tool_fn: int = 0
    arg_tp: int = 0
    arg_fp: int = 0
    arg_fn: int = 0
    n_expected_calls: int = 0
    n_predicted_calls: int = 0
    response_language: str | None = None
    language_match: bool | None = None
    turn: int | None = None
    """A conversation turn's verdict: the index of the user turn it scores (0-based); ``None`` for a case."""
    turns: tuple[Verdict, ...] = ()
    """A conversation's verdict: the verdict of each of its user turns, in order."""
    details: Mapping[str, Any] | None = field(default=None, hash=False)
    """Plain data (JSON-serializable). A turn's: ``steps``, ``calls``, and where they apply ``decode_failures``,
    ``refused``, ``state_differences``, ``missing_results``, ``missing_calls`` and ``extra_calls`` (against the
    turn's ground truth, as ``name(arguments)`` strings), ``steps_with_calls`` and ``argument_rule_disagrees``
    (``{"other_rule", "valid", "failure_mode"}``: how the other argument rule scores the turn, where its
    validity differs). A conversation's: ``argument_rule`` (``"bfcl"`` or ``"strict"``). ``None`` for a case."""
    # ``message`` is a property (below): derived, built on first read.

    def __init__(
        self,
        valid: bool,
        error_code: ErrorCode,
        failure_mode: FailureMode | TurnFailureMode | None = None,
        format_agnostic_valid: bool = False,
        detected_format: str | None = None,
        format_match: bool | None = None,
        function_selection_correct: bool = False,
        tool_tp: int = 0,
        tool_fp: int = 0,
        tool_fn: int = 0,
        arg_tp: int = 0,
        arg_fp: int = 0,
        arg_fn: int = 0,
        n_expected_calls: int = 0,
        n_predicted_calls: int = 0,
        response_language: str | None = None,
        language_match: bool | None = None,
        turn: int | None = None,
        turns: tuple[Verdict, ...] = (),
        details: Mapping[str, Any] | None = None,
        message: Any = "",
    ) -> None:
        # Written out because scoring builds one per response: the generated
        # frozen __init__ goes through object.__setattr__ per field, 3x slower.
        # Same fields, order and defaults as declared above, plus ``message``
        # (a str, or an object with a ``message``; a test checks the signature).
        self.__dict__.update(
            valid=valid, error_code=error_code, failure_mode=failure_mode,
            format_agnostic_valid=format_agnostic_valid, detected_format=detected_format,
            format_match=format_match, function_selection_correct=function_selection_correct,
            tool_tp=tool_tp, tool_fp=tool_fp, tool_fn=tool_fn, arg_tp=arg_tp, arg_fp=arg_fp, arg_fn=arg_fn,
            n_expected_calls=n_expected_calls, n_predicted_calls=n_predicted_calls,
            response_language=response_language, language_match=language_match, turn=turn, turns=turns,
            details=details, _message=message,
        )

    @property
    def message(self) -> str:
        """One readable line on why the response failed ("" when valid).

        Built on first read from whatever the checker left (an object with a
        ``message``): most verdicts are counted, never read.
        """
        source = self.__dict__["_message"]
        if not isinstance(source, str):
            source = str(getattr(source, "message", source))
            self.__dict__["_message"] = source
        return source

    @property
    def bfcl_error_type(self) -> str | None:
        """bfcl-eval's ``error_type`` string, ``None`` when valid."""
        return self.error_code.bfcl_error_type

    @property
    def first_failure(self) -> Verdict | None:
        """A conversation's first failed turn (the one bfcl-eval reports), or ``None``."""
        return next((turn for turn in self.turns if not turn.valid), None)

    @property
    def argument_rule(self) -> str | None:
        """The argument rule a conversation was scored under: ``"bfcl"`` (the method decides, as in bfcl-eval) or
        ``"strict"`` (arguments must validate against the function docs); ``None`` for a single-turn case."""
        return (self.details or {}).get("argument_rule")

    @property
    def argument_rule_disagreements(self) -> int:
        """How many of a conversation's turns the other argument rule scores otherwise."""
        return sum(1 for turn in self.turns if "argument_rule_disagrees" in (turn.details or {}))

    def stored(self) -> tuple[str, bool, str | None]:
        """(``to_dict`` as compact JSON, ``valid``, the error code's name): what a run store keeps of a verdict.

        Built on first call and kept: the scorer's memo returns the same verdict for every identical answer.
        """
        found = self.__dict__.get("_stored")
        if found is None:
            d = self.to_dict()
            found = self.__dict__["_stored"] = (json.dumps(d, separators=(",", ":")), bool(d["valid"]),
                                                d["error_code"])
        return found

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (enums as their string values); the contract in docs/CONTRACTS.md. A turn's: ``turn``,
        ``valid``, ``failure_mode``, ``bfcl_error_type``, ``details``; a conversation's: ``valid``,
        ``failure_mode``, ``bfcl_error_type``, ``argument_rule`` and its ``turns``'."""
        mode = None if self.failure_mode is None else self.failure_mode.value
        if self.turn is not None:
            return {"turn": self.turn, "valid": self.valid, "failure_mode": mode,
                    "bfcl_error_type": self.bfcl_error_type, "details": dict(self.details or {})}
        if self.turns:
            return {"valid": self.valid, "failure_mode": mode, "bfcl_error_type": self.bfcl_error_type,
                    "argument_rule": self.argument_rule, "turns": [turn.to_dict() for turn in self.turns]}
        return {
            "valid": self.valid,
            "error_code": self.error_code.name,
            "bfcl_error_type": self.bfcl_error_type,
            "failure_mode": mode,
            "format_agnostic_valid": self.format_agnostic_valid,
            "detected_format": None if self.detected_format is None else str(self.detected_format),
            "format_match": self.format_match,
            "function_selection_correct": self.function_selection_correct,
            "tool_tp": self.tool_tp,
            "tool_fp": self.tool_fp,
            "tool_fn": self.tool_fn,
            "arg_tp": self.arg_tp,
            "arg_fp": self.arg_fp,
            "arg_fn": self.arg_fn,
            "n_expected_calls": self.n_expected_calls,
            "n_predicted_calls": self.n_predicted_calls,
            "response_language": self.response_language,
            "language_match": self.language_match,
            "message": self.message,
        }
