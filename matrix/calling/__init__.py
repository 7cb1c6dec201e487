"""Call modes beyond the prompt: native tool calling and constrained decoding (issue 13 groundwork).

Everything here is pure: a case's BFCL function docs in, request pieces out.

- :func:`tool_schemas`: the functions as provider ``tools=`` entries (BFCL
  types mapped to JSON Schema, names made provider-safe and reversible);
  :func:`read_tool_calls`: the provider's ``tool_calls`` back as the checker's
  calls, or a typed :class:`ToolCallFailure`.
- :func:`json_schema` / :func:`response_format`: the JSON Schema of a
  json-return-format answer (plain for llama.cpp/vLLM; wrapped and strict for
  OpenAI, read back with :func:`unwrap_strict_answer`).
- :func:`gbnf_grammar`: a llama.cpp grammar whose every sentence our parser
  reads as calls of the case's functions, for each return format and tag.
- :func:`format_calls`: calls written in a return format (the inverse of the
  parser; for tests and the fake client).
- :func:`call_request`: the request pieces of a native or constrained variant
  (``Prompt.request``); :class:`RequestRenderer` attaches them to rendered prompts.

Constraints are built from function names and parameter types only, never
from a ground truth.
"""

from ._format import format_calls
from ._grammar import ANY_DEPTH, MAX_ITEMS, MAX_STRING, gbnf_grammar
from ._request import RequestRenderer, call_request
from ._schema import MAX_CALLS, ConstraintError, json_schema, parameter_schema, response_format, unwrap_strict_answer
from ._tools import ToolCallFailure, ToolCalls, ToolSchemas, read_tool_calls, tool_names, tool_schemas

__all__ = [
    "ANY_DEPTH",
    "MAX_CALLS",
    "MAX_ITEMS",
    "MAX_STRING",
    "ConstraintError",
    "RequestRenderer",
    "ToolCallFailure",
    "ToolCalls",
    "ToolSchemas",
    "call_request",
    "format_calls",
    "gbnf_grammar",
    "json_schema",
    "parameter_schema",
    "read_tool_calls",
    "response_format",
    "tool_names",
    "tool_schemas",
    "unwrap_strict_answer",
]
