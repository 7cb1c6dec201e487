"""How variants and dimensions are named in tables and figures.

A variant the grid labelled (``label:`` in its YAML, stored with the run) is
shown by that label. The others get a generated label: ``display_labels``
shortens their dimension labels to the dimensions that vary in the report
(BFCL's own labels for a BFCL grid); ``shared_dimensions`` names what the
shortened labels leave out. Runs stored before grids had labels hold
dimension labels only, so every variant of theirs gets a generated label.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from promptgrid.variants import DIMENSIONS, CallMode, PromptFormat, Variant

from ._model import ReportData, VariantInfo

__all__ = ["DIMENSION_TITLES", "display_labels", "given_label", "labels_for", "shared_dimensions", "short_label"]

DIMENSION_TITLES = {
    "return_format": "Return format",
    "doc_format": "Function-doc format",
    "tool_call_tag": "Tool-call tag",
    "prompt_format": "Prompt format",
    "prompt_style": "Prompt style",
    "template": "Template",
    "instruction_language": "Instruction language",
    "description_language": "Description language",
    "call_mode": "Call mode",
    "tool_results": "Tool results",
}

_STYLE_SHORT = {"experimental_bfcl": "exp", "experimental": "exp-blog"}
_CORE = ("doc_format", "return_format", "tool_call_tag")


def _varying(variants: Sequence[VariantInfo]) -> set[str] | None:
    if len(variants) < 2 or not all(v.dimensions for v in variants):
        return None
    return {d for d in DIMENSIONS if len({str(v.dimensions.get(d, DIMENSIONS[d].default)) for v in variants}) > 1}


_LABEL_CACHE: dict[int, tuple[ReportData, dict[str, str]]] = {}


def display_labels(data: ReportData) -> dict[str, str]:
    cached = _LABEL_CACHE.get(id(data))
    if cached is not None and cached[0] is data:
        return cached[1]
    labels = labels_for(data.variants)
    _LABEL_CACHE.clear()  # one report at a time; keeps the cache from growing
    _LABEL_CACHE[id(data)] = (data, labels)
    return labels


def short_label(data: ReportData, variant_id: str) -> str:
    """The display label of a variant (see ``display_labels``)."""
    return display_labels(data).get(variant_id) or data.variant(variant_id).label


def given_label(info: VariantInfo) -> str | None:
    """The label the grid gave this variant, or None when the stored label is its dimension label (or id)."""
    if not info.label or info.label == info.id:
        return None
    try:
        made = Variant(**{k: v for k, v in info.dimensions.items() if k in DIMENSIONS}).dimension_label
    except (TypeError, ValueError):  # dimensions of another version: the stored label is all there is
        return None
    return None if made == info.label else info.label


def labels_for(variants: Sequence[VariantInfo]) -> dict[str, str]:
    """Variant id -> the label a report shows: the grid's own label, else one generated from the dimensions.

    Generated labels show only the dimensions that vary among ``variants``:
    for a BFCL grid exactly BFCL's labels (``json->python,False md``); for a
    translation grid, where the formats are fixed, ``instr=en desc=query``
    instead of a long label repeated on every row; ``native`` and
    `` constrained`` where the call mode varies. They fall back to the rows'
    labels when variants carry no dimensions or the short labels collide
    (with each other or with a grid's label). Labels shown twice (two grids'
    labels in one run directory) get the variant's dimension label in brackets.
    """
    given = {v.id: g for v in variants if (g := given_label(v))}
    out = _generated(variants)
    if given and set(given.values()) & {out[v.id] for v in variants if v.id not in given}:
        out = {v.id: v.label for v in variants}
    out.update(given)
    if len(set(out.values())) != len(out):
        counts: dict[str, int] = {}
        for label in out.values():
            counts[label] = counts.get(label, 0) + 1
        for v in variants:
            if counts[out[v.id]] > 1 and v.id in given:
                made = Variant(**{k: x for k, x in v.dimensions.items() if k in DIMENSIONS}).dimension_label
                out[v.id] = f"{given[v.id]} [{made}]"
    return out


def _generated(variants: Sequence[VariantInfo]) -> dict[str, str]:
    """Short labels from the dimensions that vary; every full label when two short ones would clash."""
    full = {v.id: v.label for v in variants}
    varying = _varying(variants)
    if not varying:
        return full
    out = {}
    for v in variants:
        d = {k: v.dimensions.get(k, DIMENSIONS[k].default) for k in DIMENSIONS}
        out[v.id] = " ".join(_label_parts(d, varying)) or v.label
    if len(set(out.values())) != len(out):
        return full
    return out


def _label_parts(d: Mapping[str, Any], varying: set[str]) -> list[str]:
    """The words of a generated short label: the values of the varying dimensions, in a fixed order."""
    parts = []
    native = "call_mode" in varying and str(d["call_mode"]) == CallMode.NATIVE.value
    if native:
        parts.append("native")
    elif varying & set(_CORE):
        parts.append(f"{d['doc_format']}->{d['return_format']},{d['tool_call_tag']}")
    if "prompt_format" in varying and d["prompt_format"] == PromptFormat.MARKDOWN:
        parts.append("md")
    if "prompt_style" in varying and d["prompt_style"] != "classic":
        parts.append(_STYLE_SHORT.get(str(d["prompt_style"]), str(d["prompt_style"])))
    if "template" in varying:
        parts.append(f"[{d['template']}]")
    if varying & {"instruction_language", "description_language"}:
        parts.append(f"instr={d['instruction_language']} desc={d['description_language']}")
    if "call_mode" in varying and str(d["call_mode"]) == CallMode.CONSTRAINED.value:
        parts.append("constrained")
    return parts


def shared_dimensions(data: ReportData) -> str:
    """The dimension values every variant shares, when short labels leave them out ('' otherwise)."""
    varying = _varying(data.variants)
    generated = [v for v in data.variants if given_label(v) is None]
    if not varying or not generated or all(display_labels(data)[v.id] == v.label for v in generated):
        return ""
    first = data.variants[0].dimensions
    shown = [k for k in DIMENSIONS if k not in varying and (k != "tool_results" or k in first)]  # "auto": left out
    return ", ".join(f"{k}={first.get(k, DIMENSIONS[k].default)}" for k in shown)
