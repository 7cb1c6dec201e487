"""Grid YAML: schema, validation and expansion into variants.

A grid file::

    name: my_grid                  # optional; defaults to the file name
    description: what it measures  # optional
    extends: bfcl_v4               # optional: a built-in name or a path, relative to this file
    template_dir: ./my_templates   # optional: user .j2 templates and styles/*.yaml catalogs
    base:                          # default value of every dimension (others: DIMENSIONS defaults)
      template: bfcl_v4
    include:                       # blocks, expanded in order
      - product:                   # cross product, first key outermost
          return_format: [python, json]
          tool_call_tag: [true, false]
      - vary:                      # one dimension at a time away from base
          prompt_format: [markdown]
      - variants:                  # explicit points (each a partial mapping over base)
          - {prompt_style: experimental}
          - {prompt_format: markdown, label: md prompt}   # label: optional, the variant's own name
        with: {doc_format: xml}    # optional on any block: applied to every point of it
    exclude:                       # drop every variant matching all keys of one entry
      - {return_format: json, doc_format: python}
      - {return_format: [verbose_xml, concise_xml], tool_call_tag: true}   # a list = any of

With ``extends``, the parent's base is the starting point (this file's base
overrides it key by key), and the parent's include and exclude blocks come
before this file's. A grid with no include block is the single base variant.
Expansion is deterministic; duplicates collapse onto their first occurrence.

``call_mode: native`` ignores return_format, doc_format and tool_call_tag (the
provider's tool calls have no answer format): a native point takes their
defaults, so a product crossing native with the formats gives one native
variant per value of the other dimensions (first occurrence kept). Naming
``native`` and a non-default value of one of them in the same mapping (``base``,
one ``variants:`` entry, one ``with:``) is a contradiction and a GridError;
values that reach a native point from a product or vary axis, from ``base``,
``with`` or a parent grid are simply not used.

``label:`` in a ``variants:`` entry names that variant in reports, ``grid show``
and ``--variant``: a one-line string of at most ``MAX_LABEL_CHARS`` characters
(surrounding spaces dropped; no control or bidi characters). Labels are unique
within a grid: a label another variant has (its own or its dimension label,
e.g. ``json->python,False``, or its id) is a GridError naming the lines, and
so is one variant (the same point listed twice, or a child grid's point that
the parent labels) given two different labels. The same point listed again
with a label gives the label to its first occurrence, so points of a product
are named by listing them again in a ``variants:`` block.
A variant without a label is shown by its dimension label, shortened in
reports to the dimensions that vary (see ``promptgrid.matrix.report``).
"""

from __future__ import annotations

import itertools
import math
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from promptgrid.errors import GridError, closest

from ._dimensions import BUILTIN_STYLES, BUILTIN_TEMPLATES, DIMENSIONS, NATIVE_IGNORED, CallMode
from ._variant import Variant
from ._yaml import MAX_GRID_BYTES, compose_yaml, read_yaml_text
from ._yaml import YamlNode as _Node

__all__ = ["MAX_LABEL_CHARS", "MAX_VARIANTS", "Grid", "builtin_grids", "load_grid"]

MAX_VARIANTS = 100_000
"""Default cap on the points a grid's blocks give (counted before any is built, so a runaway product fails fast)."""

_TOP_KEYS = ("name", "description", "extends", "template_dir", "base", "include", "exclude")
_BLOCK_KEYS = ("product", "vary", "variants", "with")

MAX_LABEL_CHARS = 80
"""The longest label a grid may give a variant (labels are shown whole in every table, figure and card)."""

# C0/C1 controls (newlines, tabs, ESC) and the bidi marks, embeddings, overrides and isolates.
_BAD_LABEL_CHARS = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


@dataclass(frozen=True)
class Grid:
    """An expanded grid: its variants in order, and where it came from."""

    name: str
    description: str
    variants: tuple[Variant, ...]
    source: str
    base: Variant = field(default_factory=Variant)
    template_dir: Path | None = None

    def __repr__(self) -> str:
        """One line (``variants`` lists them): name, how many variants, where it came from."""
        where = f", template_dir={str(self.template_dir)!r}" if self.template_dir is not None else ""
        return f"Grid({self.name!r}, {len(self.variants)} variants, source={self.source!r}{where})"

    def __len__(self) -> int:
        return len(self.variants)

    def __iter__(self) -> Iterator[Variant]:
        return iter(self.variants)

    def select(self, wanted: Iterable[str] = ()) -> tuple[Variant, ...]:
        """The variants whose id or label is in ``wanted``, in grid order; all of them when it is empty."""
        wanted = list(wanted)
        if not wanted:
            return self.variants
        known = {v.id: v for v in self.variants} | {v.label: v for v in self.variants}
        missing = [w for w in wanted if w not in known]
        if missing:
            raise GridError(
                f"grid {self.name!r} has no variant {missing[0]!r}.{closest(missing[0], known)}"
                f" List them with: promptgrid grid show {self.name}"
            )
        chosen = {known[w] for w in wanted}
        return tuple(v for v in self.variants if v in chosen)

    def variant(self, variant_id: str) -> Variant:
        for v in self.variants:
            if v.id == variant_id:
                return v
        raise GridError(
            f"grid {self.name!r} has no variant {variant_id!r}."
            f"{closest(variant_id, (v.id for v in self.variants))}"
            " List its variants with: promptgrid grid show " + self.name
        )


# --------------------------------------------------------------------------- validation


@dataclass
class _Spec:
    """A grid file after validation, before expansion."""

    name: str
    description: str
    where: str
    base: dict[str, Any]
    # (kind, payload, with, line); a variants block's payload is a list of (point, _Label or None).
    blocks: list[tuple[str, Any, dict[str, Any], int]]
    excludes: list[dict[str, tuple[Any, ...]]]
    template_dir: Path | None
    styles: frozenset[str]
    templates: frozenset[str]


@dataclass(frozen=True)
class _Label:
    """A ``label:`` of a ``variants:`` entry and where it was written."""

    text: str
    where: str
    line: int
    key: str


def _label(spec: _Spec, node: _Node, key: str) -> _Label:
    line = node.key_line or node.line
    if not isinstance(node.value, str):
        got = type(node.value).__name__ if node.value is not None else "nothing"
        raise _fail(spec.where, line, key, f"a label is a string, got {got} {node.value!r}. Quote it if it "
                    "looks like a number or true/false.")
    text = node.value.strip()
    if not text:
        raise _fail(spec.where, line, key, "the label is empty; remove label: to use the generated one.")
    if len(text) > MAX_LABEL_CHARS:
        raise _fail(spec.where, line, key, f"the label is {len(text)} characters long; at most "
                    f"{MAX_LABEL_CHARS} (it is shown whole in every table and card).")
    bad = _BAD_LABEL_CHARS.search(text)
    if bad:
        raise _fail(spec.where, line, key, f"the label holds the control character U+{ord(bad.group()):04X}; "
                    "a label is one line of visible text.")
    return _Label(text, spec.where, line, key)


def _fail(where: str, line: int, key: str, message: str) -> GridError:
    return GridError(f"{where}:{line}: {key}: {message}")


def _expect(node: _Node, kind: type, where: str, key: str, what: str) -> Any:
    if not isinstance(node.value, kind):
        got = type(node.value).__name__ if node.value is not None else "nothing"
        raise _fail(where, node.line, key, f"expected {what}, got {got}.")
    return node.value


def _user_names(template_dir: Path | None) -> tuple[frozenset[str], frozenset[str]]:
    if template_dir is None:
        return frozenset(), frozenset()
    templates = frozenset(p.stem for p in template_dir.glob("*.j2"))
    styles = frozenset(p.stem for p in (template_dir / "styles").glob("*.yaml"))
    return styles, templates


def _known_values(spec: _Spec, dim: str) -> tuple[str, ...] | None:
    """The values a dimension may take (built-in and the grid's own styles and templates); None: not a closed set."""
    if dim == "prompt_style":
        return tuple(BUILTIN_STYLES) + tuple(sorted(spec.styles))
    if dim == "template":
        return tuple(BUILTIN_TEMPLATES) + tuple(sorted(spec.templates))
    values = DIMENSIONS[dim].values
    return None if values is None else tuple(str(v) for v in values)


def _check_value(spec: _Spec, dim: str, value: Any, line: int, key: str) -> Any:
    if dim not in DIMENSIONS:
        raise _fail(spec.where, line, key, f"unknown dimension {dim!r}.{closest(dim, DIMENSIONS)} "
                    f"Dimensions: {', '.join(DIMENSIONS)}.")
    d = DIMENSIONS[dim]
    if d.kind is bool and not isinstance(value, bool):
        hint = ""
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no"):
            hint = f" Write {value.lower() in ('true', 'yes')} without quotes."
        raise _fail(spec.where, line, key, f"{dim} must be true or false, got {value!r}.{hint}")
    if d.kind is str and not isinstance(value, str):
        raise _fail(spec.where, line, key, f"{dim} must be a string, got {type(value).__name__} {value!r}.")
    known = _known_values(spec, dim)
    if known is not None and value not in known and d.kind is not bool:
        extra = ""
        if dim in ("prompt_style", "template"):
            extra = " (user ones go in template_dir: <name>.j2, styles/<name>.yaml)"
        raise _fail(spec.where, line, key, f"unknown {dim} {value!r}.{closest(value, known)} "
                    f"Valid: {', '.join(known)}{extra}.")
    if not d.accepts(value) and d.kind is not bool:
        raise _fail(spec.where, line, key, f"{value!r} is not a valid {dim} (a language code such as "
                    "'de' or 'pt-BR', or 'query').")
    return value


def _point(spec: _Spec, node: _Node, key: str) -> dict[str, Any]:
    """One explicit mapping of dimension: value (base, a ``variants:`` entry, a ``with:``), validated."""
    mapping = _expect(node, dict, spec.where, key, "a mapping of dimension: value")
    if "label" in mapping:
        v = mapping["label"]
        raise _fail(spec.where, (v.key_line or v.line), f"{key}.label",
                    "label: names one variant: write it in an entry of a variants: block.")
    point = {
        dim: _check_value(spec, dim, v.value, (v.key_line or v.line), f"{key}.{dim}")
        for dim, v in mapping.items()
    }
    if point.get("call_mode") == CallMode.NATIVE:
        for dim in NATIVE_IGNORED:
            if dim in point and point[dim] != DIMENSIONS[dim].default:
                v = mapping[dim]
                raise _fail(spec.where, (v.key_line or v.line), f"{key}.{dim}",
                            f"{dim}: {point[dim]} does not apply with call_mode: native (the model answers "
                            f"with the provider's tool calls); remove {dim} from this mapping or use call_mode "
                            "prompt or constrained.")
    return point


def _entry(spec: _Spec, node: _Node, key: str) -> tuple[dict[str, Any], _Label | None]:
    """One entry of a ``variants:`` block: its point and its ``label:`` (None when it gives none)."""
    mapping = _expect(node, dict, spec.where, key, "a mapping of dimension: value")
    label = _label(spec, mapping["label"], f"{key}.label") if "label" in mapping else None
    rest = {k: v for k, v in mapping.items() if k != "label"}
    return _point(spec, _Node(rest, node.line, node.key_line), key), label


def _axes(spec: _Spec, node: _Node, key: str) -> dict[str, tuple[Any, ...]]:
    mapping = _expect(node, dict, spec.where, key, "a mapping of dimension: [values]")
    if not mapping:
        raise _fail(spec.where, node.line, key, "is empty: an empty product has no variants.")
    axes: dict[str, tuple[Any, ...]] = {}
    for dim, v in mapping.items():
        if dim == "label":
            raise _fail(spec.where, (v.key_line or v.line), f"{key}.label",
                        "label: names one variant: write it in an entry of a variants: block.")
        values = v.value if isinstance(v.value, list) else [v]
        if not values:
            raise _fail(spec.where, v.line, f"{key}.{dim}", "empty list: an empty product has no variants.")
        axes[dim] = tuple(
            _check_value(spec, dim, item.value, item.line, f"{key}.{dim}") for item in values
        )
    return axes


def _check_keys(top: dict[str, _Node], where: str) -> None:
    """Reject a top-level key the grid schema does not know (naming the closest one)."""
    for k, v in top.items():
        if k not in _TOP_KEYS:
            raise _fail(where, (v.key_line or v.line), k,
                        f"unknown key.{closest(k, _TOP_KEYS)} Valid keys: {', '.join(_TOP_KEYS)}.")


def _template_dir(top: dict[str, _Node], where: str, path: Path | None, parent: _Spec | None) -> Path | None:
    """The grid's ``template_dir`` (relative to its file; an existing directory), else its parent's."""
    template_dir = parent.template_dir if parent else None
    if "template_dir" in top:
        raw = _expect(top["template_dir"], str, where, "template_dir", "a directory path")
        template_dir = (path.parent / raw if path else Path(raw)).resolve()
        if not template_dir.is_dir():
            raise _fail(where, top["template_dir"].line, "template_dir", f"{template_dir} is not a directory.")
    return template_dir


def _block(spec: _Spec, block_node: _Node, bkey: str) -> tuple[str, Any, dict[str, Any], int]:
    """One ``include:`` block, validated: (kind, payload, with, line) for ``_Spec.blocks``."""
    where = spec.where
    block = _expect(block_node, dict, where, bkey, "a block with product, vary or variants")
    kinds = [k for k in block if k in ("product", "vary", "variants")]
    for k, v in block.items():
        if k not in _BLOCK_KEYS:
            raise _fail(where, (v.key_line or v.line), f"{bkey}.{k}",
                        f"unknown block key.{closest(k, _BLOCK_KEYS)} "
                        f"A block has one of product, vary, variants (and optionally with).")
    if len(kinds) != 1:
        raise _fail(where, block_node.line, bkey,
                    "a block needs exactly one of product, vary or variants.")
    kind = kinds[0]
    with_ = _point(spec, block["with"], f"{bkey}.with") if "with" in block else {}
    if kind == "variants":
        points = _expect(block[kind], list, where, f"{bkey}.variants", "a list of mappings")
        if not points:
            raise _fail(where, block[kind].line, f"{bkey}.variants", "empty list: no variants.")
        payload: Any = [_entry(spec, p, f"{bkey}.variants[{j}]") for j, p in enumerate(points)]
    else:
        payload = _axes(spec, block[kind], f"{bkey}.{kind}")
    return kind, payload, with_, block_node.line


def _read_spec(source: str | os.PathLike[str], seen: tuple[str, ...] = ()) -> _Spec:
    path, text, where = _locate(source, seen[-1] if seen else None)
    key = str(path.resolve()) if path else where
    if key in seen:
        chain = " -> ".join([*seen, key])
        raise GridError(f"{where}: extends: cycle in grid extends: {chain}.")
    root = compose_yaml(text, where, GridError)
    if root is None:
        raise GridError(f"{where}:1: the grid file is empty. See the schema in the README (Grid YAML).")
    top = _expect(root, dict, where, "(top level)", "a mapping")
    _check_keys(top, where)

    parent: _Spec | None = None
    if "extends" in top:
        ext = _expect(top["extends"], str, where, "extends", "a grid name or path")
        parent = _read_spec(_relative(ext, path), (*seen, key))

    template_dir = _template_dir(top, where, path, parent)
    styles, templates = _user_names(template_dir)
    if parent:
        styles, templates = styles | parent.styles, templates | parent.templates

    default_name = path.stem if path else where
    name = _expect(top["name"], str, where, "name", "a string") if "name" in top else default_name
    description = (
        _expect(top["description"], str, where, "description", "a string")
        if "description" in top else (parent.description if parent else "")
    )
    spec = _Spec(name, description, where, dict(parent.base) if parent else {},
                 list(parent.blocks) if parent else [], list(parent.excludes) if parent else [],
                 template_dir, styles, templates)
    if "base" in top:
        spec.base.update(_point(spec, top["base"], "base"))

    if "include" in top:
        blocks = _expect(top["include"], list, where, "include", "a list of blocks")
        for i, block_node in enumerate(blocks):
            spec.blocks.append(_block(spec, block_node, f"include[{i}]"))

    if "exclude" in top:
        items = _expect(top["exclude"], list, where, "exclude", "a list of mappings")
        for i, item in enumerate(items):
            axes = _axes(spec, item, f"exclude[{i}]")
            spec.excludes.append(axes)
    return spec


# --------------------------------------------------------------------------- expansion


def _point_count(kind: str, payload: Any) -> int:
    """How many points a block gives, computed from its axes (nothing is built)."""
    if kind == "product":
        return math.prod(len(values) for values in payload.values())
    if kind == "vary":
        return sum(len(values) for values in payload.values())
    return len(payload)


def _check_size(spec: _Spec, max_variants: int) -> None:
    total = 0
    for kind, payload, _with, line in spec.blocks:
        total += _point_count(kind, payload)
        if total > max_variants:
            raise GridError(
                f"{spec.where}:{line}: include: the grid would expand to at least {total:,} variants "
                f"(over the cap of {max_variants:,}, counted before exclude). Cross fewer dimensions in one "
                "product: use vary for dimensions changed one at a time, or split the product into smaller "
                "product blocks (exclude then drops points within them).")


def _expand(spec: _Spec, max_variants: int = MAX_VARIANTS) -> tuple[Variant, list[Variant]]:
    _check_size(spec, max_variants)
    base = Variant(**spec.base)
    points: list[Variant] = []
    labels: dict[Variant, _Label] = {}
    if not spec.blocks:
        points.append(base)
    for kind, payload, with_, _line in spec.blocks:
        for overlay, label in _overlays(kind, payload):
            point = replace(base, **{**overlay, **with_})
            points.append(point)
            if label is not None:
                _give_label(labels, point, label)
    out = _kept(points, spec.excludes)
    if not out:
        line = spec.blocks[0][3] if spec.blocks else 1
        raise GridError(f"{spec.where}:{line}: include: the grid expands to no variants "
                        "(every point is excluded). Loosen the exclude rules.")
    return base, _labelled(out, labels)


def _overlays(kind: str, payload: Any) -> Iterator[tuple[dict[str, Any], _Label | None]]:
    """The points of one block, in order, as (dimension values over base, label or None)."""
    if kind == "product":
        keys = list(payload)
        for combo in itertools.product(*(payload[k] for k in keys)):
            yield dict(zip(keys, combo, strict=True)), None
    elif kind == "vary":
        for dim, values in payload.items():
            for value in values:
                yield {dim: value}, None
    else:
        yield from payload


def _give_label(labels: dict[Variant, _Label], point: Variant, label: _Label) -> None:
    """Record ``label`` for ``point``; a point already labelled otherwise is a GridError."""
    first = labels.setdefault(point, label)
    if first.text != label.text:
        raise _fail(label.where, label.line, label.key,
                    f"this variant ({point.id}) is already labelled {first.text!r} at {first.where}:"
                    f"{first.line}; a variant has one label: keep one of them.")


def _kept(points: list[Variant], excludes: list[dict[str, tuple[Any, ...]]]) -> list[Variant]:
    """The points no exclude rule matches, each once (at its first occurrence)."""
    def excluded(v: Variant) -> bool:
        return any(all(getattr(v, d) in vals for d, vals in rule.items()) for rule in excludes)

    seen: set[Variant] = set()
    out: list[Variant] = []
    for v in points:
        if v not in seen and not excluded(v):
            seen.add(v)
            out.append(v)
    return out


def _labelled(variants: list[Variant], labels: dict[Variant, _Label]) -> list[Variant]:
    """The variants with their labels; a label that another variant has (its own label, its dimension label
    or its id: ``--variant`` takes both) is a GridError."""
    out = [replace(v, given_label=labels[v].text) if v in labels else v for v in variants]
    names: dict[str, list[Variant]] = {}
    for v in out:
        for name in {v.label, v.dimension_label, v.id}:
            names.setdefault(name, []).append(v)
    for v in out:
        own = labels.get(v)
        others = [o for o in names[own.text] if o != v] if own is not None else []
        if own is None or not others:
            continue
        other = others[0]
        if other in labels and labels[other].text == own.text:
            a, b = sorted((labels[other], own), key=lambda lab: (lab.where, lab.line))
            raise _fail(b.where, b.line, b.key, f"label {own.text!r} is also the label of another variant at "
                        f"{a.where}:{a.line}; labels are unique within a grid.")
        what = "id" if own.text == other.id else "dimension label"
        raise _fail(own.where, own.line, own.key, f"label {own.text!r} is the {what} of another variant "
                    f"({other.id}); labels are unique within a grid: choose another.")
    return out


# --------------------------------------------------------------------------- lookup


def _grid_dir() -> Any:
    return resources.files("promptgrid.variants").joinpath("grids")


def builtin_grids() -> dict[str, str]:
    """Built-in grid names mapped to their descriptions, in name order."""
    out: dict[str, str] = {}
    for entry in sorted(_grid_dir().iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".yaml"):
            data = yaml.safe_load(entry.read_text(encoding="utf-8")) or {}
            out[entry.name[: -len(".yaml")]] = str(data.get("description", "")).strip()
    return out


def _relative(ref: str, path: Path | None) -> str | Path:
    if ref.endswith((".yaml", ".yml")) and path is not None:
        return path.parent / ref
    return ref


def _locate(source: str | os.PathLike[str], parent: str | None) -> tuple[Path | None, str, str]:
    """Return (path or None for built-ins, text, display name)."""
    ref = str(source)
    if isinstance(source, Path) or ref.endswith((".yaml", ".yml")) or "/" in ref:
        path = Path(ref)
        if not path.is_file():
            raise GridError(f"grid file {ref} not found.{closest(Path(ref).stem, builtin_grids())}"
                            " Built-in grids: promptgrid grids")
        return path, read_yaml_text(path, str(path), GridError, MAX_GRID_BYTES, "grid files"), str(path)
    entry = _grid_dir().joinpath(f"{ref}.yaml")
    if not entry.is_file():
        names = builtin_grids()
        raise GridError(f"no built-in grid named {ref!r}.{closest(ref, names)} "
                        f"Built-in grids: {', '.join(names)}; or give a path to a .yaml file.")
    return None, entry.read_text(encoding="utf-8"), f"<builtin>/{ref}.yaml"


def load_grid(source: str | os.PathLike[str], *, max_variants: int = MAX_VARIANTS) -> Grid:
    """Load, validate and expand a grid: a built-in name or a path to a YAML file.

    Raises ``GridError`` (exit code 2) naming file, line and key on any problem,
    and when the blocks would give more than ``max_variants`` points (checked
    before any variant is built; a positive integer: nan, inf, bools and
    negatives are a ``GridError``, not a cap turned off). A grid file is
    read up to ``MAX_GRID_BYTES`` (256 KiB), before it is parsed.
    """
    if isinstance(max_variants, bool) or not isinstance(max_variants, int) or max_variants < 1:
        raise GridError(f"max_variants must be a positive integer, not {max_variants!r}.")
    spec = _read_spec(source)
    base, variants = _expand(spec, max_variants)
    return Grid(spec.name, spec.description, tuple(variants), spec.where, base, spec.template_dir)


def iter_dimension_values(grid: Grid) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """Each dimension and the distinct values it takes in the grid, in first-seen order."""
    for dim in DIMENSIONS:
        values = tuple(dict.fromkeys(getattr(v, dim) for v in grid.variants))
        yield dim, values
