"""The parse result record, its failure codes and their bfcl-eval equivalents.

A parse never raises on model output: whatever the text, the parser returns a
:class:`ParseResult` whose ``failure`` says what went wrong (an Enum code),
and whose flags (tag found, per-call wrapping, prose, code fence, detected
format, unknown XML type names) feed the checker's failure-mode classifier.

``bfcl_error_type`` says what bfcl-eval 2026.3.23's pipeline reports at the
decode stage for the same text, so results stay joinable with the leaderboard:

- ``"ast_decoder:decoder_failed"``: bfcl's ``decode_ast`` raises;
- ``"ast_decoder:decoder_wrong_output_format"``: it returns something that is
  not a list of ``{name: {param: value}}``;
- ``None``: bfcl's decoder returns a well-formed list and its AST checker
  decides. With ``failure is None`` that list is ``calls``; with a failure
  (an empty response, a JSON answer that does not decode) bfcl's list is
  empty, so its checker reports a wrong call count -- unless
  ``bfcl_deviation`` is set: then bfcl decodes something we refuse.

``bfcl_deviation`` names the documented deliberate difference from bfcl-eval
(docs/parsing.md) when one applies to this text, else ``None``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Any

from promptgrid.variants import XML_RETURN_FORMATS, ReturnFormat

__all__ = [
    "BFCL_DECODER_FAILED",
    "BFCL_WRONG_OUTPUT_FORMAT",
    "Deviation",
    "EITHER_XML",
    "OTHER_XML",
    "ParseFailure",
    "ParseResult",
    "format_matches",
]

#: Detected formats beyond the four ``ReturnFormat`` members: an XML answer
#: without parameters (either XML format), and calls in made-up XML tags.
EITHER_XML = "xml"
OTHER_XML = "other_xml"

BFCL_DECODER_FAILED = "ast_decoder:decoder_failed"
BFCL_WRONG_OUTPUT_FORMAT = "ast_decoder:decoder_wrong_output_format"


class ParseFailure(str, enum.Enum):
    """Why a response could not be turned into calls.

    The value is a stable lowercase code (written to result stores).
    ``bfcl_error_type`` is the decode-stage error bfcl-eval usually reports for
    it; a result may override it (see ``ParseResult.bfcl_error_type``).
    """

    EMPTY = "empty"
    """Nothing but whitespace (or an empty tool-call tag)."""
    TAG_MISSING = "tag_missing"
    """``<TOOLCALL>`` was required and is absent."""
    UNCLOSED_TAG = "unclosed_tag"
    """``<TOOLCALL>``, ``<functions>`` or an XML element is opened and never closed."""
    UNEXPECTED_TAG = "unexpected_tag"
    """``<TOOLCALL>`` was not asked for and breaks the format (Python without tag)."""
    WRONG_FORMAT = "wrong_format"
    """Calls are there, in another return format (``detected_format`` says which)."""
    BAD_SYNTAX = "bad_syntax"
    """The requested format, but not well-formed."""
    UNCLOSED_BRACKET = "unclosed_bracket"
    """A bracket or string is opened and never closed (or closed by the wrong bracket)."""
    BAD_ESCAPING = "bad_escaping"
    """Quotes escaped with backslashes where the format wants plain quotes (``\\"``)."""
    CODE_FENCE = "code_fence"
    """A Markdown code fence (```` ```python ````) where the format does not allow one."""
    EXTRA_TEXT = "extra_text"
    """Calls in the requested format with prose around them the format does not allow."""
    PROSE_ONLY = "prose_only"
    """Text without any function call."""
    NOT_A_CALL = "not_a_call"
    """Well-formed, but not a list of calls (a list of strings, a dict without "function", ...)."""
    BAD_VALUE = "bad_value"
    """A value cannot be decoded (``type="integer"`` with "4.5", division by zero, ``{x, y}``)."""
    UNSAFE_EXPRESSION = "unsafe_expression"
    """An expression bfcl-eval would ``eval`` that is not plain bounded arithmetic."""
    TOO_LARGE = "too_large"
    """Over the input size, token or element limits (see ``_limits``)."""
    TOO_DEEP = "too_deep"
    """Nested deeper than ``MAX_DEPTH``."""
    XML_ENTITY_REFUSED = "xml_entity_refused"
    """The XML has a DTD or entity declaration; refused, never expanded."""
    WRONG_XML_TYPE = "wrong_xml_type"
    """A ``type`` attribute outside the prompt's list (only with ``strict_xml_types=True``)."""

    @property
    def bfcl_error_type(self) -> str:
        """The decode-stage error type bfcl-eval reports for this failure by default."""
        return BFCL_DECODER_FAILED


class Deviation(str, enum.Enum):
    """Deliberate differences from bfcl-eval's decoder (each one in docs/parsing.md)."""

    EVAL_REFUSED = "eval_refused"
    """A value bfcl-eval would ``eval`` (arithmetic with names, calls, ...) is refused."""
    ARITH_BOUNDS = "arith_bounds"
    """Literal arithmetic beyond the operand/size bounds is refused."""
    UNARY_OP = "unary_op"
    """``+x`` is x (bfcl: -x); ``not x`` / ``~x`` are refused (bfcl: -x)."""
    JSON_CLOSE_BRACE_BRACKET = "json_close_brace_bracket"
    """A JSON call list with ``}]`` inside decodes fully (bfcl's regex truncates it: no calls)."""
    KWARGS_UNPACK = "kwargs_unpack"
    """``f(**d)`` is not a call (bfcl: a parameter named None)."""
    NON_STRING_NAME = "non_string_name"
    """A JSON function name or XML parameter name that is not a string is not a call."""
    XML_DTD_REFUSED = "xml_dtd_refused"
    """Any DTD anywhere in an XML answer is refused (bfcl parses the <functions> block alone)."""
    LIMITS = "limits"
    """Size, token or depth limits refused an input bfcl-eval might have parsed."""


@dataclass(frozen=True, init=False)
class ParseResult:
    """What a response contains, as far as function calls go.

    Fields (all derived from the text alone):

    - ``calls``: the calls, each ``{func_name: {param: value}}``, in order;
      ``None`` when the parse failed. An empty tuple is a valid parse of "no
      calls" (``[]``, ``<functions></functions>``).
    - ``failure``: ``None`` on success, else why (:class:`ParseFailure`).
    - ``detected_format``: the format the calls are written in (a
      ``ReturnFormat``; ``EITHER_XML`` ("xml") when an XML answer has no
      parameter to tell the two XML formats apart; ``OTHER_XML``
      ("other_xml") for made-up tags such as ``<func><arg>1</arg></func>``), or ``None``
      when no call-like content was found. On a strict failure it comes from
      the format-agnostic parser, so ``WRONG_FORMAT`` says which format it was.
    - ``tag_found``: a ``<TOOLCALL>`` tag is present (exact spelling for the
      strict parser; any letter case for ``parse_any``).
    - ``per_call_wrapping``: the calls are split over several wrappers (one
      ``<TOOLCALL>``, ``<functions>``, JSON array or Python list per call)
      instead of one. bfcl-eval reads only the first wrapper.
    - ``prose``: there is text before/after the calls (tags and code fences
      aside).
    - ``code_fence``: the calls sit in a Markdown code fence.
    - ``unknown_xml_types``: XML ``type`` attribute values outside the
      prompt's list (e.g. "int" for "integer"); bfcl-eval keeps such values as
      strings, so its checker then reports a type error.
    - ``bfcl_error_type`` / ``bfcl_deviation``: see the module docstring
      (``parse_any`` results always have ``bfcl_error_type=None``).
    - ``details``: one human-readable line (what failed, where).
    - ``any_calls``: the calls the format-agnostic reader finds, for the
      format-agnostic score: ``calls`` when the strict parse succeeded (all
      blocks when they were split per call, where bfcl-eval keeps the first),
      else what ``parse_any`` recovered (``None`` if nothing).
    """

    calls: tuple[dict[str, dict[str, Any]], ...] | None
    failure: ParseFailure | None = None
    detected_format: str | None = None
    tag_found: bool = False
    per_call_wrapping: bool = False
    prose: bool = False
    code_fence: bool = False
    unknown_xml_types: tuple[str, ...] = ()
    bfcl_error_type: str | None = None
    bfcl_deviation: Deviation | None = None
    details: str = ""
    any_calls: tuple[dict[str, dict[str, Any]], ...] | None = None

    def __init__(
        self,
        calls: tuple[dict[str, dict[str, Any]], ...] | None,
        failure: ParseFailure | None = None,
        detected_format: str | None = None,
        tag_found: bool = False,
        per_call_wrapping: bool = False,
        prose: bool = False,
        code_fence: bool = False,
        unknown_xml_types: tuple[str, ...] = (),
        bfcl_error_type: str | None = None,
        bfcl_deviation: Deviation | None = None,
        details: str = "",
        any_calls: tuple[dict[str, dict[str, Any]], ...] | None = None,
    ) -> None:
        # Hand-written because it is on the hot path: the generated frozen
        # __init__ sets each field through object.__setattr__, twice as slow.
        # Same signature and defaults as the fields above (a test checks it).
        self.__dict__.update(
            calls=calls,
            failure=failure,
            detected_format=detected_format,
            tag_found=tag_found,
            per_call_wrapping=per_call_wrapping,
            prose=prose,
            code_fence=code_fence,
            unknown_xml_types=unknown_xml_types,
            bfcl_error_type=bfcl_error_type,
            bfcl_deviation=bfcl_deviation,
            details=details,
            any_calls=any_calls,
        )

    @property
    def ok(self) -> bool:
        """True when the text parsed into calls (possibly zero calls)."""
        return self.failure is None

    @property
    def n_calls(self) -> int:
        return 0 if self.calls is None else len(self.calls)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly summary (calls omitted: they may hold non-JSON values)."""
        return {
            "ok": self.ok,
            "failure": None if self.failure is None else self.failure.value,
            "detected_format": None if self.detected_format is None else str(self.detected_format),
            "tag_found": self.tag_found,
            "per_call_wrapping": self.per_call_wrapping,
            "prose": self.prose,
            "code_fence": self.code_fence,
            "unknown_xml_types": list(self.unknown_xml_types),
            "bfcl_error_type": self.bfcl_error_type,
            "bfcl_deviation": None if self.bfcl_deviation is None else self.bfcl_deviation.value,
            "n_calls": self.n_calls,
            "details": self.details,
        }

    def evolve(self, **changes: Any) -> ParseResult:
        """A copy with some fields changed (records are frozen)."""
        return replace(self, **changes)


def failed(
    failure: ParseFailure,
    details: str,
    *,
    bfcl_error_type: str | None = BFCL_DECODER_FAILED,
    deviation: Deviation | None = None,
    **flags: Any,
) -> ParseResult:
    """Build a failed result; ``bfcl_error_type=None`` means bfcl decodes ``[]``."""
    return ParseResult(
        calls=None,
        failure=failure,
        bfcl_error_type=bfcl_error_type,
        bfcl_deviation=deviation,
        details=details,
        **flags,
    )


def format_matches(detected: str | None, requested: ReturnFormat | str) -> bool:
    """Whether a detected format counts as the requested one.

    ``EITHER_XML`` (an XML answer without parameters) matches both XML formats.
    """
    if detected is None:
        return False
    if detected == EITHER_XML:
        return requested in XML_RETURN_FORMATS
    return detected == requested
