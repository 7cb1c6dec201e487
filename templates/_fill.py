"""Catalog strings in templates: ``{placeholder}`` filling and attribute access.

Catalog strings carry ``{name}`` placeholders (kept verbatim by translators).
They are filled here rather than with ``str.format`` so that other braces (a
JSON example in a user catalog) need no escaping and a translation with a
stray placeholder does not crash a run; ``promptgrid translate``'s checks
report such strings instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["CatalogText", "fill", "split_placeholders"]

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}( ?)")


def fill(text: str, tidy: bool = False, **values: Any) -> str:
    """Replace ``{name}`` placeholders in a catalog string (Jinja filter ``fill``).

    Unlike ``str.format``, unknown placeholders and other braces are left as
    they are, so a catalog string may contain JSON. With ``tidy=True`` a
    placeholder whose value is empty takes one following space with it
    (``"{output_format}. {param_types} You"`` -> ``"... You"``, no double space).
    """

    def sub(match: re.Match[str]) -> str:
        name, space = match.group(1), match.group(2)
        if name not in values:
            return match.group(0)
        value = str(values[name])
        return value if tidy and not value else value + space

    return _PLACEHOLDER.sub(sub, text)


def split_placeholders(text: str) -> tuple[tuple[str, str | None, str], ...]:
    """``text`` as (literal, placeholder name or None, space after the placeholder) parts."""
    parts: list[tuple[str, str | None, str]] = []
    pos = 0
    for match in _PLACEHOLDER.finditer(text):
        parts.append((text[pos:match.start()], match.group(1), match.group(2)))
        pos = match.end()
    parts.append((text[pos:], None, ""))
    return tuple(parts)


class CatalogText(dict[str, str]):
    """A catalog's strings: a dict whose keys are also attributes.

    Templates write ``text.persona``; Jinja tries attribute access before
    item access, and a failed attribute lookup costs an exception per use.
    Instance attributes shadow dict methods, so a key named ``items`` works too.
    """

    def __init__(self, strings: Mapping[str, str]) -> None:
        super().__init__(strings)
        self.__dict__.update(strings)
