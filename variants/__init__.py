"""Variant grids: dimensions, the Variant record, grid YAML loading and expansion."""

from ._dimensions import BUILTIN_STYLES, BUILTIN_TEMPLATES, DIMENSIONS, QUERY_LANGUAGE, Dimension
from ._errors import (
    DatasetError,
    GridError,
    MissingDependencyError,
    MissingTranslationError,
    PromptgridError,
    TemplateError,
    closest,
)
from ._grid import Grid, builtin_grids, iter_dimension_values, load_grid
from ._records import CATEGORIES, Case, Prompt, messages_sha256
from ._variant import Variant
from ._yaml import YamlNode, compose_yaml

__all__ = [
    "BUILTIN_STYLES",
    "BUILTIN_TEMPLATES",
    "CATEGORIES",
    "DIMENSIONS",
    "QUERY_LANGUAGE",
    "Case",
    "DatasetError",
    "Dimension",
    "Grid",
    "GridError",
    "MissingDependencyError",
    "MissingTranslationError",
    "Prompt",
    "PromptgridError",
    "TemplateError",
    "Variant",
    "YamlNode",
    "builtin_grids",
    "closest",
    "compose_yaml",
    "iter_dimension_values",
    "load_grid",
    "messages_sha256",
]
