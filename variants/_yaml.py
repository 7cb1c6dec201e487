"""YAML read into values that remember their line, for errors that name file, line and key.

Used by every YAML file a user writes (grids here, run configs in matrix).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from promptgrid.errors import PromptgridError

__all__ = ["YamlNode", "compose_yaml", "plain"]


@dataclass
class YamlNode:
    """A YAML value with the line it started on (1-based)."""

    value: Any
    line: int
    key_line: int = 0  # for mapping values: the line of their key


def compose_yaml(text: str, where: str, error: type[PromptgridError]) -> YamlNode | None:
    """Parse ``text`` (safe loader) into nodes; ``None`` for an empty document.

    Invalid YAML and duplicate keys raise ``error`` naming ``where`` and the line.
    """
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise error(f"{where}{line}: invalid YAML: {problem}.") from None
    return None if node is None else _wrap(node, where, error)


def _wrap(node: yaml.Node, where: str, error: type[PromptgridError]) -> YamlNode:
    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[str, YamlNode] = {}
        for key_node, value_node in node.value:
            key = key_node.value
            if key in out:
                raise error(f"{where}:{key_node.start_mark.line + 1}: key {key!r} appears twice.")
            out[key] = _wrap(value_node, where, error)
            out[key].key_line = key_node.start_mark.line + 1
        return YamlNode(out, line)
    if isinstance(node, yaml.SequenceNode):
        return YamlNode([_wrap(n, where, error) for n in node.value], line)
    loader = yaml.SafeLoader("")
    try:
        return YamlNode(loader.construct_object(node, deep=True), line)
    finally:
        loader.dispose()


def plain(node: YamlNode) -> Any:
    """The plain Python value of a node tree."""
    if isinstance(node.value, dict):
        return {k: plain(v) for k, v in node.value.items()}
    if isinstance(node.value, list):
        return [plain(v) for v in node.value]
    return node.value
