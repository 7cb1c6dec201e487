"""Localization: how the renderer asks for translated prose, and which units it asks for.

The renderer never translates. For a variant whose instruction or description
language is not English it asks a :class:`Localization` (implemented by
``promptgrid.translate``) for each translatable unit and collects every unit
that comes back ``None``, so one error lists all that is missing.

Units and their keys (stable; ``promptgrid.translate`` stores by them):

* instructions - every string of the catalog a template uses, key
  ``<catalog>.<key>``, e.g. ``classic.persona``, ``experimental_bfcl.task``,
  ``massive_one_shot.instructions``. Optional style keys a catalog does not
  define come from classic and keep classic's key (``classic.heading_task``).
* descriptions - the description of every function and of every parameter,
  nested ones included: ``<func>.description`` for the function,
  ``<func>.<param>`` for a top-level parameter, ``<func>.<param>.<child>`` for a
  nested property and ``<func>.<param>[].<child>`` for a property of an array's
  items. Function names may contain dots; a key is an opaque id, never parsed.

Never localized: names, types, enum values, defaults, ``{placeholders}``,
``<TOOLCALL>``, output-format examples (``formats.yaml``), and the few words the
doc renderers write themselves (``Args:``, ``Enum values:``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from promptgrid.errors import MissingTranslationError

__all__ = [
    "Localization",
    "MissingUnits",
    "description_units",
    "is_english",
    "localize_functions",
]


@runtime_checkable
class Localization(Protocol):
    """Source of translations. ``None`` means: no translation for this unit."""

    def instruction(self, source: str, lang: str, key: str) -> str | None:
        """Translation of an instruction string (style/template catalog entry)."""
        ...

    def description(self, source: str, lang: str, key: str) -> str | None:
        """Translation of a function or parameter description."""
        ...


def is_english(lang: str) -> bool:
    """``en`` and its regional forms (``en-US``) need no translation: the catalogs are English."""
    return lang == "en" or lang.startswith("en-")


def _walk_params(prefix: str, properties: Any) -> Iterator[tuple[str, tuple[Any, ...], str]]:
    if not isinstance(properties, Mapping):
        return
    for name, schema in properties.items():
        if not isinstance(schema, Mapping):
            continue
        key = f"{prefix}.{name}"
        if isinstance(schema.get("description"), str):
            yield key, (name,), schema["description"]
        for sub_key, path, text in _walk_params(key, schema.get("properties")):
            yield sub_key, (name, "properties", *path), text
        items = schema.get("items")
        if isinstance(items, Mapping):
            for sub_key, path, text in _walk_params(f"{key}[]", items.get("properties")):
                yield sub_key, (name, "items", "properties", *path), text


def _units(functions: Sequence[Mapping[str, Any]]) -> Iterator[tuple[int, tuple[Any, ...], str, str]]:
    """(function index, path inside the function, key, source text) for every description."""
    for index, fn in enumerate(functions):
        name = str(fn.get("name", ""))
        if isinstance(fn.get("description"), str):
            yield index, ("description",), f"{name}.description", fn["description"]
        params = fn.get("parameters")
        props = params.get("properties") if isinstance(params, Mapping) else None
        for key, path, text in _walk_params(name, props):
            yield index, ("parameters", "properties", *path, "description"), key, text


def description_units(functions: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """Every translatable description of ``functions`` as (key, English source), in document order."""
    return [(key, text) for _i, _path, key, text in _units(functions)]


class MissingUnits:
    """Collects the units a render could not localize, then raises them all at once."""

    def __init__(self) -> None:
        self.instructions: list[tuple[str, str]] = []  # (lang, key)
        self.descriptions: list[tuple[str, str]] = []

    def __bool__(self) -> bool:
        return bool(self.instructions or self.descriptions)

    def raise_if_any(self, where: str) -> None:
        if not self:
            return
        langs = sorted({lang for lang, _ in self.instructions + self.descriptions})
        parts = []
        for label, units, what in (
            ("instruction", self.instructions, "instructions"),
            ("description", self.descriptions, "descriptions"),
        ):
            if units:
                keys = [k for _, k in units]
                shown = ", ".join(keys[:5]) + (f", ... ({len(keys) - 5} more)" if len(keys) > 5 else "")
                parts.append(f"{len(keys)} {label}(s) [{shown}] (get them with: promptgrid translate "
                             f"--to {','.join(langs)} --what {what} --backend amazon|llm:MODEL|catalog"
                             + (" --dataset DATASET" if what == "descriptions" else "") + ")")
        total = len(self.instructions) + len(self.descriptions)
        raise MissingTranslationError(
            f"{where}: {total} translation(s) missing for language {', '.join(repr(x) for x in langs)}: "
            + "; ".join(parts) + "."
        )


def _set_path(fn: dict[str, Any], path: tuple[Any, ...], value: str) -> None:
    """Set ``fn[path...] = value``, copying each mapping on the way (the source is shared)."""
    node = fn
    for step in path[:-1]:
        child = dict(node[step])
        node[step] = child
        node = child
    node[path[-1]] = value


def localize_functions(
    functions: Sequence[Mapping[str, Any]],
    lang: str,
    lookup: Callable[[str, str, str], str | None] | None,
    missing: MissingUnits,
) -> list[Mapping[str, Any]]:
    """``functions`` with every description replaced by its ``lang`` translation.

    ``lookup`` is ``Localization.description`` (or ``None`` when there is no
    localization: then every unit is missing). Missing units are added to
    ``missing``; the input is never modified.
    """
    out: list[Mapping[str, Any]] = list(functions)
    copied: set[int] = set()
    for index, path, key, source in _units(functions):
        translated = lookup(source, lang, key) if lookup is not None else None
        if translated is None:
            missing.descriptions.append((lang, key))
            continue
        if index not in copied:
            out[index] = dict(out[index])
            copied.add(index)
        _set_path(out[index], path, translated)  # type: ignore[arg-type]
    return out
