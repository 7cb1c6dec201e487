"""No import cycle among promptgrid's modules, type-only and function-level imports included.

Checked on the source, like tests/test_dependency_direction.py (which checks
imports across layers): this one finds cycles inside a layer, such as two
scoring modules importing each other under ``TYPE_CHECKING``. The facade
``promptgrid/__init__.py`` is left out (it names the public API lazily, by
design above everything).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# folder -> package it is installed as (pyproject's package-dir)
PACKAGES = {"promptgrid": "promptgrid", "variants": "promptgrid.variants", "templates": "promptgrid.templates",
            "translate": "promptgrid.translate", "matrix": "promptgrid.matrix"}


def _modules() -> dict[str, Path]:
    out = {}
    for folder, package in PACKAGES.items():
        paths = (ROOT / folder).glob("*.py") if folder == "promptgrid" else (ROOT / folder).rglob("*.py")
        for path in paths:
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([package, *parts])
            if name != "promptgrid":
                out[name] = path
    return out


def _graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the promptgrid modules it imports (``from pkg import sub`` counts as importing ``pkg.sub``)."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name in modules}
            elif isinstance(node, ast.ImportFrom):
                base = package[:len(package) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    if sub in modules:
                        edges.add(sub)
                    elif target in modules:
                        edges.add(target)
        graph[name] = edges - {name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_checker_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle() -> None:
    modules = _modules()
    graph = _graph(modules)
    assert len(modules) > 50 and sum(map(len, graph.values())) > 100
    cycles = _cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)
