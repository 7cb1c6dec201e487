"""The dimensions a prompt variant can vary, their values and defaults.

BFCL V4's five dimensions (return format, function-doc format, tool-call tag,
prompt format, prompt style) plus three from MASSIVE-Agents: the template and
the languages of instructions and of function descriptions. The table in
DESIGN.md is the source of these names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BUILTIN_STYLES",
    "BUILTIN_TEMPLATES",
    "DIMENSIONS",
    "Dimension",
    "LANGUAGE_RE",
    "QUERY_LANGUAGE",
]

RETURN_FORMATS = ("python", "json", "verbose_xml", "concise_xml")
DOC_FORMATS = ("json", "python", "xml")
PROMPT_FORMATS = ("plaintext", "markdown")
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
        Dimension("return_format", "python", RETURN_FORMATS, str, "syntax the model must answer in"),
        Dimension("doc_format", "json", DOC_FORMATS, str, "syntax of the function documentation"),
        Dimension("tool_call_tag", False, (False, True), bool, "wrap calls in <TOOLCALL>...</TOOLCALL>"),
        Dimension("prompt_format", "plaintext", PROMPT_FORMATS, str, "plain text or markdown sections"),
        Dimension("prompt_style", "classic", None, str, "wording catalog (classic, experimental, ...)"),
        Dimension("template", "bfcl_v4", None, str, "prompt template (.j2) that assembles the prompt"),
        Dimension("instruction_language", "en", None, str, "language of the instructions, or 'query'"),
        Dimension("description_language", "en", None, str, "language of function descriptions, or 'query'"),
    )
}
