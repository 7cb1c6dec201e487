"""YAML read into values that remember their line, for errors that name file, line and key.

Used by every YAML file a user writes (grids here, run configs in matrix,
style catalogs in templates, translation catalogs in translate). These files
are shared between people, so reading one is bounded: a size cap (read at most
the cap + 1 bytes; ``MAX_GRID_BYTES`` for grids and run configs, which are
written by hand, so a 15 MB one is refused before it is parsed), an alias
budget checked on the composed graph before anything is expanded (a
"billion laughs" file fails at once), plain YAML tags only (no ``!!python/*``),
scalar keys only, and no alias that contains itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from promptgrid.errors import PromptgridError

__all__ = ["MAX_ALIAS_NODES", "MAX_GRID_BYTES", "MAX_YAML_BYTES", "YamlNode", "compose_yaml", "load_yaml", "plain",
           "read_yaml_text"]

MAX_YAML_BYTES = 16 * 1024 * 1024
"""Largest YAML file read (grids and configs are a few KB; big translation catalogs a few MB)."""

MAX_GRID_BYTES = 256 * 1024
"""Largest grid or run-config file read: the built-in grids are about 1 KB, and parsing is slow (1 MiB of listed
variants took 15 s on a loaded machine, a 15 MB grid 97 s and 1.4 GB before it was refused)."""

MAX_ALIAS_NODES = 100_000
"""How many nodes aliases may add beyond those written in the file (``*a`` repeats the whole of ``&a``)."""

_SAFE_TAGS = frozenset(f"tag:yaml.org,2002:{t}" for t in
                       ("null", "bool", "int", "float", "str", "timestamp", "seq", "map", "merge"))


@dataclass
class YamlNode:
    """A YAML value with the line it started on (1-based)."""

    value: Any
    line: int
    key_line: int = 0  # for mapping values: the line of their key


def read_yaml_text(path: Path, where: str, error: type[PromptgridError], limit: int | None = None,
                   kind: str = "YAML files") -> str:
    """The text of the YAML file at ``path``: refused past ``limit`` bytes (``MAX_YAML_BYTES`` when not given or
    larger; checked on the file's size before reading, and by reading at most ``limit`` + 1 bytes, so a pipe or
    a growing file cannot pass it either) or if not UTF-8. ``kind`` names the files in the message."""
    if limit is None or limit >= MAX_YAML_BYTES:
        limit, kind = MAX_YAML_BYTES, "YAML files"
    too_big = (f"{where}: the file is {{size:,}} bytes; {kind} are limited to {limit:,} bytes. "
               "Split it or check that it is the file you meant.")
    try:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > limit:
                raise error(too_big.format(size=size))
            data = f.read(limit + 1)
        if len(data) > limit:
            raise error(too_big.replace("{size:,}", "more than {size:,}").format(size=limit))
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{where}: not UTF-8 text (byte {exc.start}). Save the file as UTF-8.") from None
    except OSError as exc:
        raise error(f"{where}: cannot read the file: {exc.strerror or exc}.") from None


def compose_yaml(text: str, where: str, error: type[PromptgridError]) -> YamlNode | None:
    """Parse ``text`` (safe loader) into nodes; ``None`` for an empty document.

    Invalid YAML, duplicate keys, a non-scalar key, a tag other than the plain
    YAML ones, an alias that contains itself, a text over ``MAX_YAML_BYTES``
    and aliases that would add more than ``MAX_ALIAS_NODES`` nodes raise
    ``error`` naming ``where`` and the line. The alias budget is checked on the
    composed graph (each node counted once) before any alias is expanded.
    """
    if len(text) > MAX_YAML_BYTES:
        raise error(f"{where}: the text is {len(text):,} characters; YAML is limited to {MAX_YAML_BYTES:,}.")
    node = _compose_fast(text)
    if node is not None:
        return _checked(node, where, error)
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise error(f"{where}{line}: invalid YAML: {problem}.") from None
    except RecursionError:
        raise error(f"{where}: YAML nested too deeply. Flatten the file.") from None
    if node is None:
        return None
    return _checked(node, where, error)


_FAST_LOADER = getattr(yaml, "CSafeLoader", None)
"""libyaml's safe loader, where PyYAML was built with it: the shipped catalogs (600 KB) compose in 0.02 s instead
of 0.35 s. Same resolver and the same nodes; a text it cannot read is read again by the pure-Python loader, whose
error names the problem and its line."""


def _compose_fast(text: str) -> yaml.Node | None:
    """The composed graph from libyaml; ``None`` where it is absent, the document is empty or the text is not
    YAML it reads (the caller then composes with the pure-Python loader)."""
    if _FAST_LOADER is None:
        return None
    try:
        return yaml.compose(text, Loader=_FAST_LOADER)
    except (yaml.YAMLError, RecursionError):
        return None


def _checked(node: yaml.Node, where: str, error: type[PromptgridError]) -> YamlNode:
    expanded = _check(node, where, error, {}, set())
    distinct = _count_distinct(node)
    if expanded - distinct > MAX_ALIAS_NODES:
        raise error(f"{where}: aliases (*name) would expand the file to {expanded:,} values "
                    f"(at most {MAX_ALIAS_NODES:,} more than written). Write the values out or use fewer aliases.")
    loader = yaml.SafeLoader("")  # one loader builds every scalar (one per scalar cost most of the time)
    try:
        return _wrap(node, where, error, loader)
    finally:
        loader.dispose()


def load_yaml(text: str, where: str, error: type[PromptgridError]) -> Any:
    """The plain Python value of a YAML text, read with the bounds of ``compose_yaml`` (``None`` if empty)."""
    node = compose_yaml(text, where, error)
    return None if node is None else plain(node)


def _tag_name(tag: str) -> str:
    return "!!" + tag.removeprefix("tag:yaml.org,2002:") if tag.startswith("tag:yaml.org,2002:") else tag


def _check(node: yaml.Node, where: str, error: type[PromptgridError], sizes: dict[int, int],
           open_: set[int]) -> int:
    """Check tags and keys; return the node count once aliases are expanded (memoized, so linear in the file)."""
    ident = id(node)
    if ident in sizes:
        return sizes[ident]
    line = node.start_mark.line + 1
    if ident in open_:
        raise error(f"{where}:{line}: an alias refers to a value that contains it (endless). Remove the alias.")
    if node.tag not in _SAFE_TAGS:
        raise error(f"{where}:{line}: tag {_tag_name(node.tag)} is not allowed: only plain YAML values "
                    "(strings, numbers, booleans, null, lists, mappings). Remove the tag.")
    open_.add(ident)
    total = 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise error(f"{where}:{key_node.start_mark.line + 1}: a key must be a plain string, "
                            "not a list or mapping. Quote it or restructure.")
            total += _check(key_node, where, error, sizes, open_) + _check(value_node, where, error, sizes, open_)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            total += _check(item, where, error, sizes, open_)
    open_.discard(ident)
    sizes[ident] = total
    return total


def _count_distinct(root: yaml.Node) -> int:
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                stack.extend((k, v))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return len(seen)


def _wrap(node: yaml.Node, where: str, error: type[PromptgridError], loader: yaml.SafeLoader) -> YamlNode:
    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[str, YamlNode] = {}
        for key_node, value_node in node.value:
            key = key_node.value
            if key in out:
                raise error(f"{where}:{key_node.start_mark.line + 1}: key {key!r} appears twice.")
            out[key] = _wrap(value_node, where, error, loader)
            out[key].key_line = key_node.start_mark.line + 1
        return YamlNode(out, line)
    if isinstance(node, yaml.SequenceNode):
        return YamlNode([_wrap(n, where, error, loader) for n in node.value], line)
    try:
        return YamlNode(loader.construct_object(node, deep=True), line)
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: a date like 2024-13-45, an int past 4300 digits
        problem = str(getattr(exc, "problem", None) or exc).splitlines()[0]
        raise error(f"{where}:{line}: cannot read value {node.value[:40]!r}: {problem}. Quote the value.") from None


def plain(node: YamlNode) -> Any:
    """The plain Python value of a node tree."""
    if isinstance(node.value, dict):
        return {k: plain(v) for k, v in node.value.items()}
    if isinstance(node.value, list):
        return [plain(v) for v in node.value]
    return node.value
