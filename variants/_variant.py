"""The Variant record: one point of a grid."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any

from ._dimensions import DIMENSIONS, NATIVE_IGNORED, CallMode, DocFormat, PromptFormat, ReturnFormat, ToolResults

__all__ = ["Variant"]

# Id tokens use BFCL's own spelling so result files join with bfcl-eval's
# ``format_sensitivity_N:CONFIG:ENTRY`` ids. In bfcl-eval, ``style=experimental``
# means bfcl-eval's wording, which promptgrid calls ``experimental_bfcl``; the
# blog's wording (promptgrid's ``experimental``) therefore gets its own token.
_STYLE_ID = {"experimental_bfcl": "experimental", "experimental": "experimental_blog"}
_STYLE_LABEL = {"experimental_bfcl": " exp", "experimental": " exp-blog"}

# value (or member: same hash, equal) -> member, for the enum-valued dimensions.
_RETURN_FORMATS: dict[str, ReturnFormat] = {f.value: f for f in ReturnFormat}
_DOC_FORMATS: dict[str, DocFormat] = {f.value: f for f in DocFormat}
_PROMPT_FORMATS: dict[str, PromptFormat] = {f.value: f for f in PromptFormat}
_CALL_MODES: dict[str, CallMode] = {m.value: m for m in CallMode}
_TOOL_RESULTS: dict[str, ToolResults] = {m.value: m for m in ToolResults}


@dataclass(frozen=True, order=True)
class Variant:
    """A prompt variant: one value for every dimension.

    Identity is the typed values; ``id`` and ``dimension_label`` are derived
    from them and never parsed back. ``label`` is the grid's own label for the
    variant when it gives one (``given_label``, not compared or hashed), else
    ``dimension_label``. The three format dimensions hold enum members; a
    plain string value (from YAML, a store, a caller) is turned into its
    member on construction, so ``Variant(return_format="json") ==
    Variant(return_format=ReturnFormat.JSON)``. A value outside the enum is
    kept as given (the grid loader rejects it with a message; a parser
    raises ``UnknownReturnFormatError``).

    In ``native`` call mode the return format, doc format and tool-call tag do
    not apply: a native variant holds their defaults whatever it was given
    (``NATIVE_IGNORED``), so a grid crossing them with ``native`` gives one
    native variant, with one id. (The grid loader rejects a file that names
    ``native`` and a non-default format in one mapping.)
    """

    return_format: ReturnFormat = ReturnFormat.PYTHON
    doc_format: DocFormat = DocFormat.JSON
    tool_call_tag: bool = False
    prompt_format: PromptFormat = PromptFormat.PLAINTEXT
    prompt_style: str = "classic"
    template: str = "bfcl_v4"
    instruction_language: str = "en"
    description_language: str = "en"
    call_mode: CallMode = CallMode.PROMPT
    tool_results: ToolResults = ToolResults.AUTO
    """Conversations only: how dict tool results reach the model (``ToolResults``); ``auto`` resolves by the
    conversation's set. Left out of the id, label and dimensions at ``auto``, so existing ids do not change."""
    given_label: str | None = field(default=None, compare=False, repr=False)
    """A label the grid gave this variant (``label:`` in a ``variants:`` entry); not part of its identity."""

    def __post_init__(self) -> None:
        # Frozen: set through object.__setattr__. Unhashable junk falls through to the checks downstream.
        for name, members in (("return_format", _RETURN_FORMATS), ("doc_format", _DOC_FORMATS),
                              ("prompt_format", _PROMPT_FORMATS), ("call_mode", _CALL_MODES),
                              ("tool_results", _TOOL_RESULTS)):
            value = getattr(self, name)
            try:
                member = members.get(value)
            except TypeError:
                continue
            if member is not None and member is not value:
                object.__setattr__(self, name, member)
        if self.call_mode is CallMode.NATIVE:
            for name in NATIVE_IGNORED:
                object.__setattr__(self, name, DIMENSIONS[name].default)

    @property
    def id(self) -> str:
        """Canonical id: BFCL's query string, then each non-default extra dimension (call mode last)."""
        style = _STYLE_ID.get(self.prompt_style, self.prompt_style)
        parts = [
            f"ret_fmt={self.return_format}",
            f"tool_call_tag={self.tool_call_tag}",
            f"func_doc_fmt={self.doc_format}",
            f"prompt_fmt={self.prompt_format}",
            f"style={style}",
        ]
        if self.template != DIMENSIONS["template"].default:
            parts.append(f"template={self.template}")
        if self.instruction_language != "en":
            parts.append(f"instr_lang={self.instruction_language}")
        if self.description_language != "en":
            parts.append(f"desc_lang={self.description_language}")
        if self.call_mode is not CallMode.PROMPT:
            parts.append(f"call_mode={self.call_mode}")
        if self.tool_results is not ToolResults.AUTO:
            parts.append(f"tool_results={self.tool_results}")
        return "&".join(parts)

    @property
    def label(self) -> str:
        """The label the grid gave the variant (``given_label``), else ``dimension_label``."""
        return self.given_label or self.dimension_label

    @property
    def dimension_label(self) -> str:
        """The label made from the dimensions, in the BFCL V4 figure notation, e.g. ``json->python,False md``.

        A native variant reads ``native`` in place of the formats; a constrained
        one ends in `` constrained``. Distinct variants have distinct dimension labels.
        """
        if self.call_mode is CallMode.NATIVE:
            label = "native"
        else:
            label = f"{self.doc_format}->{self.return_format},{self.tool_call_tag}"
        if self.prompt_format is PromptFormat.MARKDOWN:
            label += " md"
        if self.prompt_style != "classic":
            label += _STYLE_LABEL.get(self.prompt_style, f" {self.prompt_style}")
        if self.template != DIMENSIONS["template"].default:
            label += f" [{self.template}]"
        if self.instruction_language != "en" or self.description_language != "en":
            label += f" instr={self.instruction_language} desc={self.description_language}"
        if self.call_mode is CallMode.CONSTRAINED:
            label += " constrained"
        if self.tool_results is not ToolResults.AUTO:
            label += f" results={self.tool_results}"
        return label

    def dimensions(self) -> dict[str, Any]:
        """Dimension name -> value, enum members as their plain ``.value``: what files and stores hold.

        ``call_mode`` is left out when it is ``prompt`` (the default), and ``tool_results`` when it is
        ``auto``, so stores and files of runs that do not set them stay as they were before the dimensions
        existed.
        """
        out = {f.name: _plain(getattr(self, f.name)) for f in fields(self) if f.name != "given_label"}
        if self.call_mode is CallMode.PROMPT:
            del out["call_mode"]
        if self.tool_results is ToolResults.AUTO:
            del out["tool_results"]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "label": self.label, "dimensions": self.dimensions()}


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value
