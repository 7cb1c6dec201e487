"""Handlers of the commands that need no model: grids, datasets, grid show, render.

They import only variants, templates and datasets, so they start fast
(no litellm, no matplotlib).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator

from tabulate import tabulate

from promptgrid.variants import Grid, Variant, builtin_grids, load_grid
from promptgrid.errors import closest
from promptgrid.errors import GridError

__all__ = ["cmd_datasets", "cmd_grid_show", "cmd_grids", "cmd_render", "localization", "select_variants"]


def cmd_grids(args: argparse.Namespace) -> int:
    rows = []
    for name, description in builtin_grids().items():
        grid = load_grid(name)
        rows.append([name, len(grid.variants), description])
    print(tabulate(rows, headers=["grid", "variants", "description"], tablefmt="simple",
                   maxcolwidths=[None, None, 90]))
    return 0


def cmd_datasets(args: argparse.Namespace) -> int:
    from promptgrid.matrix.datasets import list_datasets

    rows = [[name, description] for name, description in list_datasets(bfcl_data=args.bfcl_data).items()]
    print(tabulate(rows, headers=["dataset", "description"], tablefmt="simple", maxcolwidths=[None, 100]))
    return 0


def cmd_grid_show(args: argparse.Namespace) -> int:
    grid = load_grid(args.grid)
    if args.json:
        json.dump([v.to_dict() for v in grid.variants], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print(f"{grid.name}: {len(grid.variants)} variants ({grid.source})")
    if grid.description:
        print(grid.description)
    print()
    rows = [[i + 1, v.label, v.id] for i, v in enumerate(grid.variants)]
    print(tabulate(rows, headers=["#", "label", "id"], tablefmt="simple"))
    return 0


def select_variants(grid: Grid, wanted: list[str]) -> tuple[Variant, ...]:
    """The grid's variants, or only those whose id or label is in ``wanted`` (grid order)."""
    if not wanted:
        return grid.variants
    known = {v.id: v for v in grid.variants} | {v.label: v for v in grid.variants}
    missing = [w for w in wanted if w not in known]
    if missing:
        raise GridError(
            f"grid {grid.name!r} has no variant {missing[0]!r}.{closest(missing[0], known)}"
            f" List them with: promptgrid grid show {grid.name}"
        )
    chosen = {known[w] for w in wanted}
    return tuple(v for v in grid.variants if v in chosen)


def localization(store: str | None):  # type: ignore[no-untyped-def]
    """The translate package's localization (catalogs + store), when it is available."""
    try:
        from promptgrid.translate import default_localization
    except ImportError:
        return None
    return default_localization(store=store)


def _prompts(args: argparse.Namespace) -> Iterator[tuple[Variant, object, object]]:
    from promptgrid.matrix.datasets import load_dataset
    from promptgrid.templates import Renderer

    grid = load_grid(args.grid)
    variants = select_variants(grid, args.variant)
    dataset = load_dataset(args.dataset, bfcl_data=args.bfcl_data)
    cases = dataset.select(case_ids=args.case or None, limit=args.limit)
    needs_translation = any(
        v.instruction_language != "en" or v.description_language != "en" for v in variants
    )
    renderer = Renderer(
        template_dir=grid.template_dir,
        localization=localization(args.store) if needs_translation else None,
        bfcl_data=args.bfcl_data,
    )
    # Case-major order: a case's function docs are rendered once per doc format
    # and reused by all of its variants.
    for case in cases:
        for variant in variants:
            yield variant, case, renderer.render(variant, case)


def cmd_render(args: argparse.Namespace) -> int:
    out = sys.stdout
    for variant, case, prompt in _prompts(args):
        if args.jsonl:
            record = {
                "variant_id": variant.id,
                "case_id": case.id,  # type: ignore[attr-defined]
                "label": variant.label,
                "messages": list(prompt.messages),  # type: ignore[attr-defined]
                "sha256": prompt.sha256,  # type: ignore[attr-defined]
            }
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
        else:
            out.write(f"=== {case.id} | {variant.label} | {variant.id}\n")  # type: ignore[attr-defined]
            for m in prompt.messages:  # type: ignore[attr-defined]
                out.write(f"--- {m['role']}\n{m['content']}\n")
            out.write("\n")
    return 0
