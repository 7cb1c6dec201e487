"""The dimensions a prompt variant can vary, their values and defaults.

BFCL V4's five dimensions (return format, function-doc format, tool-call tag,
prompt format, prompt style) plus three from MASSIVE-Agents: the template and
the languages of instructions and of function descriptions, and the call mode
(the functions and the answer format in the prompt, as provider tools, or the
answer forced into the format by a grammar or schema). One more applies to
conversations only: how tool results reach the model (``tool_results``). The
table in DESIGN.md is the source of these names.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BUILTIN_STYLES",
    "BUILTIN_TEMPLATES",
    "CallMode",
    "DIMENSIONS",
    "NATIVE_IGNORED",
    "Dimension",
    "DocFormat",
    "LANGUAGE_RE",
    "PromptFormat",
    "QUERY_LANGUAGE",
    "ReturnFormat",
    "ToolResults",
    "XML_RETURN_FORMATS",
]


class _ValueEnum(str, enum.Enum):
    """A closed set of string values: members compare, hash and serialize as their ``.value``.

    The str mixin keeps ids, JSON and store contents the plain value
    (``json.dumps`` writes ``"python"``) and lets code that reads a value back
    from a file compare or look it up directly (``ReturnFormat.JSON ==
    "json"``, same hash). ``str()`` and ``format()`` are defined here because
    Python 3.11 changed what ``Enum.__format__`` gives for mixins (3.10: the
    value; 3.12: ``ReturnFormat.JSON``): f-strings give the value everywhere.
    """

    def __str__(self) -> str:
        return self._value_

    def __format__(self, spec: str) -> str:
        return format(self._value_, spec)


class ReturnFormat(_ValueEnum):
    """The syntax a prompt asks the model to answer in (BFCL V4's four return formats)."""

    PYTHON = "python"
    JSON = "json"
    VERBOSE_XML = "verbose_xml"
    CONCISE_XML = "concise_xml"


class DocFormat(_ValueEnum):
    """The syntax of the function documentation in the prompt."""

    JSON = "json"
    PYTHON = "python"
    XML = "xml"


class PromptFormat(_ValueEnum):
    """Plain text or Markdown sections."""

    PLAINTEXT = "plaintext"
    MARKDOWN = "markdown"


class CallMode(_ValueEnum):
    """How the functions reach the model and how its answer is shaped.

    ``prompt``: function docs and answer format in the prompt (BFCL's "(Prompt)"
    models; the default). ``native``: the functions as the provider's tool
    schemas, the answer read from its tool calls (BFCL's "(FC)"). ``constrained``:
    the prompt of ``prompt`` mode, and decoding forced into the return format by a
    grammar or JSON schema built from the function docs.
    """

    PROMPT = "prompt"
    NATIVE = "native"
    CONSTRAINED = "constrained"


class ToolResults(_ValueEnum):
    """How a conversation's tool results reach the model when a method returns a dict (conversations only).

    ``ascii``: as bfcl-eval gives them, ``json.dumps`` with its default ``ensure_ascii``, so non-ASCII text
    arrives escaped (``"\\u0936..."``); ``utf8``: the same JSON with the characters as they are. Results that
    are strings or lists reach the model as text either way. ``auto`` (the default): ``utf8`` for the
    built-in ``mini-mt`` set, whose states hold Hindi, Japanese and Chinese texts, and ``ascii``, bfcl-eval's,
    for every other conversation (``ascii_results_for`` in ``promptgrid.matrix.datasets._mini_mt``).
    """

    AUTO = "auto"
    ASCII = "ascii"
    UTF8 = "utf8"


#: The two XML return formats (they share a parser and the XML type names).
XML_RETURN_FORMATS = frozenset({ReturnFormat.VERBOSE_XML, ReturnFormat.CONCISE_XML})
# classic and experimental are the wordings printed in the BFCL V4 blog;
# experimental_bfcl is bfcl-eval's own (different) experimental wording, read at
# run time from an installed bfcl-eval. Grids may add user catalogs by name.
BUILTIN_STYLES = ("classic", "experimental", "experimental_bfcl")
BUILTIN_TEMPLATES = ("bfcl_v4", "bfcl_v4_clean", "bfcl_v1_zero_shot", "massive_one_shot")
# "query" means: the language of the test case's own query.
QUERY_LANGUAGE = "query"
LANGUAGE_RE = re.compile(r"^(?:[a-z]{2,3}(?:-[A-Za-z0-9]{2,8})*|query)$")


@dataclass(frozen=True)
class Dimension:
    """One axis of a grid.

    ``values`` is the closed set of accepted values, or ``None`` when the set
    is open (styles and templates a user adds, language codes); ``check``
    then validates a value's shape.
    """

    name: str
    default: Any
    values: tuple[Any, ...] | None
    kind: type
    doc: str

    def accepts(self, value: Any) -> bool:
        if self.kind is bool:
            return isinstance(value, bool)
        if not isinstance(value, str):
            return False
        if self.values is not None:
            return value in self.values
        if self.name.endswith("_language"):
            return bool(LANGUAGE_RE.match(value))
        return bool(re.match(r"^[A-Za-z0-9_.-]+$", value))


DIMENSIONS: dict[str, Dimension] = {
    d.name: d
    for d in (
        Dimension("return_format", ReturnFormat.PYTHON, tuple(ReturnFormat), str,
                  "syntax the model must answer in"),
        Dimension("doc_format", DocFormat.JSON, tuple(DocFormat), str, "syntax of the function documentation"),
        Dimension("tool_call_tag", False, (False, True), bool, "wrap calls in <TOOLCALL>...</TOOLCALL>"),
        Dimension("prompt_format", PromptFormat.PLAINTEXT, tuple(PromptFormat), str,
                  "plain text or markdown sections"),
        Dimension("prompt_style", "classic", None, str, "wording catalog (classic, experimental, ...)"),
        Dimension("template", "bfcl_v4", None, str, "prompt template (.j2) that assembles the prompt"),
        Dimension("instruction_language", "en", None, str, "language of the instructions, or 'query'"),
        Dimension("description_language", "en", None, str, "language of function descriptions, or 'query'"),
        Dimension("call_mode", CallMode.PROMPT, tuple(CallMode), str,
                  "functions in the prompt, as native tools, or answer constrained to the format"),
        Dimension("tool_results", ToolResults.AUTO, tuple(ToolResults), str,
                  "conversations: dict tool results as ASCII-escaped JSON (bfcl-eval's) or UTF-8; auto: utf8 "
                  "for mini-mt, ascii otherwise"),
    )
}

#: The dimensions that do not apply in ``native`` call mode (the provider's tool
#: calls have no return format, docs or tag): a native variant holds their defaults.
NATIVE_IGNORED = ("return_format", "doc_format", "tool_call_tag")
