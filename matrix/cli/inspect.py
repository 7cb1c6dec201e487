"""Handlers of the commands that need no model: grids, datasets, grid show and render.

They import only variants, templates and datasets (``render`` is the kind's ``render_dataset`` or
``render_run``, ``promptgrid.matrix.episodes``), so they start fast (no litellm, no matplotlib).
``render RUN_DIR`` prints a run's results as they happened, rebuilt from its store (nothing is sent to a
model).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path

from tabulate import tabulate

from promptgrid.variants import builtin_grids, load_grid

__all__ = ["cmd_datasets", "cmd_grid_show", "cmd_grids", "cmd_render"]


def cmd_grids(args: argparse.Namespace) -> int:
    rows = []
    for name, description in builtin_grids().items():
        grid = load_grid(name)
        rows.append([name, len(grid.variants), description])
    print(tabulate(rows, headers=["grid", "variants", "description"], tablefmt="simple",
                   maxcolwidths=[None, None, 90]))
    return 0


def cmd_datasets(args: argparse.Namespace) -> int:
    """Both kinds of dataset, each under a heading saying what a case is and which calls run it."""
    from promptgrid.matrix.datasets import list_datasets
    from promptgrid.matrix.datasets._conversations import list_conversation_datasets

    sections = [
        ("Single-turn datasets: one prompt, one answer per case (pg.run).", list_datasets(bfcl_data=args.bfcl_data)),
        ("Conversations: several user turns, the calls run against stateful APIs (pg.run; "
         "docs/conversations.md).", list_conversation_datasets(bfcl_data=args.bfcl_data)),
    ]
    for number, (heading, listing) in enumerate(sections):
        rows = [[name, description] for name, description in listing.items()]
        print(("\n" if number else "") + heading)
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


def cmd_render(args: argparse.Namespace) -> int:
    """``render GRID --dataset DS``: the prompts each variant sends (a conversation dataset: for the ground truth's
    trajectory); ``render RUN_DIR``: the chosen results of a run as they happened, rebuilt from its store."""
    from promptgrid.errors import RunError
    from promptgrid.matrix.episodes import kind_of_dataset, kind_of_run

    target = Path(args.grid)
    if target.is_dir():  # a run directory (a grid is a name or a YAML file)
        if args.store:
            raise RunError("--store is for rendering a grid over a dataset: render RUN_DIR rebuilds the prompts the "
                           "way the run's grid makes them, from the shipped catalogs.")
        blocks = kind_of_run(target).render_run(target, models=args.model, variants=args.variant or (),
                                                cases=args.case or (), repeats=args.repeat, limit=args.limit,
                                                dataset=args.dataset, bfcl_data=args.bfcl_data, jsonl=args.jsonl)
        if not _write_all(blocks):
            print(f"{target} has no result stored yet.", file=sys.stderr)
        return 0
    _check_grid_options(args)
    grid = load_grid(args.grid)
    _write_all(kind_of_dataset(args.dataset).render_dataset(
        grid, args.dataset, variants=args.variant or (), cases=args.case or (), limit=args.limit, store=args.store,
        bfcl_data=args.bfcl_data, jsonl=args.jsonl))
    return 0


def _write_all(blocks: Iterator[str]) -> int:
    """Write ``blocks`` to standard output as they come; how many there were."""
    n = 0
    for block in blocks:
        sys.stdout.write(block)
        n += 1
    return n


def _check_grid_options(args: argparse.Namespace) -> None:
    """``render GRID``: --dataset is needed; --model and --repeat choose the results of a run directory only."""
    from promptgrid.errors import RunError

    if args.model or args.repeat:
        raise RunError("--model and --repeat choose the episodes of a conversation run: give its run directory "
                       "(render RUN_DIR), not a grid.")
    if not args.dataset:
        raise RunError("render GRID needs --dataset DS (the cases to render); or give a run's directory to see "
                       "its results as they happened (render RUN_DIR).")
