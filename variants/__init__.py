"""Variant grids: dimensions (their value enums), the Variant record, grid YAML loading and expansion."""

from ._dimensions import (
    BUILTIN_STYLES,
    BUILTIN_TEMPLATES,
    DIMENSIONS,
    NATIVE_IGNORED,
    QUERY_LANGUAGE,
    XML_RETURN_FORMATS,
    CallMode,
    Dimension,
    DocFormat,
    PromptFormat,
    ReturnFormat,
    ToolResults,
)
from ._grid import Grid, builtin_grids, iter_dimension_values, load_grid
from ._variant import Variant
from ._yaml import YamlNode, compose_yaml

__all__ = [
    "BUILTIN_STYLES",
    "BUILTIN_TEMPLATES",
    "DIMENSIONS",
    "NATIVE_IGNORED",
    "QUERY_LANGUAGE",
    "XML_RETURN_FORMATS",
    "CallMode",
    "Dimension",
    "DocFormat",
    "Grid",
    "PromptFormat",
    "ReturnFormat",
    "ToolResults",
    "Variant",
    "YamlNode",
    "builtin_grids",
    "compose_yaml",
    "iter_dimension_values",
    "load_grid",
]
