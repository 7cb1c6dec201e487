"""Prompt templates: one Jinja environment, style catalogs, function-doc renderers.

``Renderer(template_dir, localization).render(variant, case) -> Prompt`` turns a
variant and a test case into the chat messages to send. The ``bfcl_v4``
template reproduces bfcl-eval 2026.3.23's format-sensitivity prompts byte for
byte; ``bfcl_v4_clean`` fixes their quirks; ``bfcl_v1_zero_shot`` and
``massive_one_shot`` are the MASSIVE-Agents prompts. See templates/README.md.
"""

from ._bfcl_source import BFCL_DATA_ENV, BFCL_INSTALL_HINT, BfclSource, find_bfcl, read_bfcl_assignments
from ._catalogs import (
    BFCL_STYLE,
    STYLE_OPTIONAL,
    STYLE_REQUIRED,
    StyleCatalog,
    builtin_catalog_names,
    load_bfcl_style,
    load_catalog_file,
)
from ._docs import DocFlavour, dedupe_language_hint, render_function_docs
from ._fill import fill
from ._localization import Localization, description_units, is_english, localize_functions
from ._renderer import Renderer, answer_prefix, render
from ._sandbox import MAX_PROMPT_CHARS, MAX_RENDER_SECONDS, MAX_TEMPLATE_BYTES

__all__ = [
    "BFCL_DATA_ENV",
    "BFCL_INSTALL_HINT",
    "BFCL_STYLE",
    "MAX_PROMPT_CHARS",
    "MAX_RENDER_SECONDS",
    "MAX_TEMPLATE_BYTES",
    "STYLE_OPTIONAL",
    "STYLE_REQUIRED",
    "BfclSource",
    "DocFlavour",
    "Localization",
    "Renderer",
    "StyleCatalog",
    "answer_prefix",
    "builtin_catalog_names",
    "dedupe_language_hint",
    "description_units",
    "fill",
    "find_bfcl",
    "is_english",
    "load_bfcl_style",
    "load_catalog_file",
    "localize_functions",
    "read_bfcl_assignments",
    "render",
    "render_function_docs",
]
