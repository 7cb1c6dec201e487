"""Prose catalogs: flat YAML mappings of key -> English string.

Built-in catalogs live in ``templates/catalogs/`` (package data): the style
catalogs ``classic`` and ``experimental`` (the BFCL V4 blog's wordings), the
template catalogs ``bfcl_v1_zero_shot`` and ``massive_one_shot`` (MASSIVE-Agents
Figs. 5-6) and ``formats`` (output-format examples; never translated). A user
template directory adds style catalogs as ``<dir>/styles/<name>.yaml``.

The style ``experimental_bfcl`` is bfcl-eval's own experimental wording. It is
not stored here: it is read at run time from an installed bfcl-eval (or
``--bfcl-data`` / ``PROMPTGRID_BFCL_DATA``) by parsing
``bfcl_eval/constants/default_prompts.py`` with ``ast``.

A style catalog must define :data:`STYLE_REQUIRED`; keys of
:data:`STYLE_OPTIONAL` it leaves out are taken from classic (and keep
classic's localization key).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from promptgrid.errors import TemplateError, closest
from promptgrid.variants import ReturnFormat
from promptgrid.variants._yaml import MAX_GRID_BYTES, compose_yaml, read_yaml_text

from ._bfcl_source import BFCL_INSTALL_HINT, find_bfcl, read_bfcl_assignments

__all__ = [
    "BFCL_STYLE",
    "STYLE_OPTIONAL",
    "STYLE_REQUIRED",
    "StyleCatalog",
    "builtin_catalog_names",
    "load_bfcl_style",
    "load_catalog_file",
]

BFCL_STYLE = "experimental_bfcl"
STYLE_REQUIRED = (
    "persona",
    "task",
    "tool_call_no_tag",
    "tool_call_with_tag",
    "multiturn_behavior",
    "available_tools",
)
STYLE_OPTIONAL = (
    "param_types",
    "heading_task",
    "heading_tool_call_format",
    "heading_multiturn_behavior",
    "heading_available_tools",
)
# Taken from bfcl-eval's default_prompts.py: its experimental wording and its
# XML parameter-type sentence (the same sentence as classic's, read rather than assumed).
_BFCL_PROMPTS = "constants/default_prompts.py"


@dataclass(frozen=True)
class StyleCatalog:
    """A template's style catalog: its English strings and, per key, the localization key of its source.

    Localization keys are ``<catalog>.<key>``; the translations of these strings are
    ``promptgrid.translate.TranslationCatalog`` files.
    """

    name: str
    where: str
    strings: Mapping[str, str]
    keys: Mapping[str, str]


def _catalog_dir() -> Any:
    return resources.files("promptgrid.templates").joinpath("catalogs")


def builtin_catalog_names() -> list[str]:
    return sorted(e.name[:-5] for e in _catalog_dir().iterdir() if e.name.endswith(".yaml"))


def _parse(text: str, where: str) -> dict[str, str]:
    root = compose_yaml(text, where, TemplateError)  # bounded: size, aliases, tags, keys
    if root is None:
        raise TemplateError(f"{where}:1: the catalog is empty; it must map keys to strings.")
    if not isinstance(root.value, dict):
        raise TemplateError(f"{where}:{root.line}: a catalog is a flat mapping of key: string.")
    out: dict[str, str] = {}
    for key, node in root.value.items():
        if not isinstance(node.value, str):
            raise TemplateError(f"{where}:{node.key_line}: {key}: the value must be a string (quote it).")
        out[key] = node.value
    return out


def load_catalog_file(name: str, path: Path | None = None) -> StyleCatalog:
    """A built-in catalog by name, or the YAML file at ``path`` (named ``name``)."""
    if path is None:
        entry = _catalog_dir().joinpath(f"{name}.yaml")
        if not entry.is_file():
            raise TemplateError(f"no built-in catalog {name!r}.{closest(name, builtin_catalog_names())}")
        where, text = f"<builtin>/catalogs/{name}.yaml", entry.read_text(encoding="utf-8")
    else:
        # a user style is hand-written, like a grid: refused past MAX_GRID_BYTES (256 KiB) before it is parsed
        where, text = str(path), read_yaml_text(path, str(path), TemplateError, MAX_GRID_BYTES, "style catalogs")
    strings = _parse(text, where)
    return StyleCatalog(name, where, strings, {k: f"{name}.{k}" for k in strings})


def complete_style(catalog: StyleCatalog, classic: StyleCatalog) -> StyleCatalog:
    """Check a style catalog's required keys; fill optional ones from classic."""
    missing = [k for k in STYLE_REQUIRED if k not in catalog.strings]
    if missing:
        raise TemplateError(
            f"{catalog.where}: style {catalog.name!r} lacks key(s) {', '.join(missing)}. A style catalog "
            f"needs the keys of classic: {', '.join(STYLE_REQUIRED)} (optional: {', '.join(STYLE_OPTIONAL)}, "
            "available_tools_with_tag)."
        )
    strings, keys = dict(catalog.strings), dict(catalog.keys)
    for k in STYLE_OPTIONAL:
        if k not in strings and k in classic.strings:
            strings[k], keys[k] = classic.strings[k], classic.keys[k]
    return StyleCatalog(catalog.name, catalog.where, strings, keys)


def load_bfcl_style(bfcl_data: str | os.PathLike[str] | None = None) -> StyleCatalog:
    """bfcl-eval's experimental wording, read (never imported) from its default_prompts.py."""
    source = find_bfcl(bfcl_data, error=TemplateError)
    if source is None:
        raise TemplateError(
            f"prompt style {BFCL_STYLE!r} is bfcl-eval's own experimental wording, read from an installed "
            f"bfcl-eval, and none was found. {BFCL_INSTALL_HINT}. (The style 'experimental' is the BFCL V4 "
            "blog's wording and needs no bfcl-eval.)"
        )
    where = f"{source.describe()}/{_BFCL_PROMPTS}"
    try:
        values = read_bfcl_assignments(source, _BFCL_PROMPTS, ("PROMPT_STYLE_TEMPLATES", "PARAM_TYPE_MAPPING"))
    except (FileNotFoundError, SyntaxError, ValueError) as exc:  # ValueError: not UTF-8 (the message names it)
        raise TemplateError(f"{where}: cannot read bfcl-eval's prompt styles ({exc}). {BFCL_INSTALL_HINT}.") from None
    styles = values.get("PROMPT_STYLE_TEMPLATES")
    style = styles.get("experimental") if isinstance(styles, dict) else None
    if not isinstance(style, dict) or not all(isinstance(v, str) for v in style.values()):
        raise TemplateError(
            f"{where}: no PROMPT_STYLE_TEMPLATES['experimental'] mapping of strings; this bfcl-eval version "
            "is not supported (promptgrid follows bfcl-eval 2026.3.23)."
        )
    strings: dict[str, str] = dict(style)
    param_types = values.get("PARAM_TYPE_MAPPING")
    if isinstance(param_types, dict) and isinstance(param_types.get(ReturnFormat.VERBOSE_XML), str):
        strings["param_types"] = param_types[ReturnFormat.VERBOSE_XML]
    return StyleCatalog(BFCL_STYLE, where, strings, {k: f"{BFCL_STYLE}.{k}" for k in strings})
