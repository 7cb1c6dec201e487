"""Response parsers: model text -> function calls, for the four BFCL V4 return formats.

- :func:`parse_response` parses the requested format with bfcl-eval
  2026.3.23's decoding semantics (so accuracies match the leaderboard), minus
  its unsafe parts (docs/parsing.md lists every deliberate difference);
  :func:`decode_bfcl` is the same decode without the diagnostics (calls or
  a failure, for verdict-only scoring).
- :func:`parse_any` finds calls written in any of the four formats, with or
  without tags, fences or prose, to tell "did not follow the format" apart
  from "called the wrong thing".

Both return a frozen :class:`ParseResult` and never raise on model output;
time and memory are bounded on any input (``MAX_INPUT_CHARS``, ``MAX_DEPTH``).
Model output is never evaluated.
"""

from ._agnostic import parse_any
from ._limits import MAX_DEPTH, MAX_INPUT_CHARS, MAX_PYTHON_TOKENS, MAX_XML_ELEMENTS
from ._pyast import POSITIONAL
from ._result import (
    BFCL_DECODER_FAILED,
    BFCL_WRONG_OUTPUT_FORMAT,
    EITHER_XML,
    OTHER_XML,
    Deviation,
    ParseFailure,
    ParseResult,
    format_matches,
)
from ._strict import UnknownReturnFormatError, decode_bfcl, parse_response

__all__ = [
    "BFCL_DECODER_FAILED",
    "BFCL_WRONG_OUTPUT_FORMAT",
    "EITHER_XML",
    "MAX_DEPTH",
    "MAX_INPUT_CHARS",
    "MAX_PYTHON_TOKENS",
    "MAX_XML_ELEMENTS",
    "OTHER_XML",
    "POSITIONAL",
    "Deviation",
    "ParseFailure",
    "ParseResult",
    "UnknownReturnFormatError",
    "decode_bfcl",
    "format_matches",
    "parse_any",
    "parse_response",
]
