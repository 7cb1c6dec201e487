"""Handlers of the commands that need no model: grids, datasets, grid show, render, and the export of a
conversation run.

They import only variants, templates and datasets (``render`` is
``promptgrid.render``), so they start fast (no litellm, no matplotlib).
``render RUN_DIR`` and ``export RUN_DIR`` of a conversation run print its
episodes as they happened, rebuilt by ``conversations._export`` (nothing is
sent to a model).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tabulate import tabulate

from promptgrid.display import escape_controls
from promptgrid.variants import builtin_grids, load_grid

__all__ = ["cmd_datasets", "cmd_export_conversations", "cmd_grid_show", "cmd_grids", "cmd_render"]


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
    from promptgrid.matrix.conversations._dataset import list_conversation_datasets
    from promptgrid.matrix.datasets import list_datasets

    sections = [
        ("Single-turn datasets: one prompt, one answer per case (pg.run).", list_datasets(bfcl_data=args.bfcl_data)),
        ("Conversations: several user turns, the calls run against stateful APIs (pg.run_conversations; "
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


def _request_fields(request: Mapping[str, Any] | None) -> dict[str, Any]:
    """What ``render --jsonl`` writes beside ``messages`` for a native or constrained prompt.

    ``call_mode``; native: ``tools`` (OpenAI-style tool schemas, descriptions
    localized) and ``tool_choice``; constrained: ``response_format`` (OpenAI
    ``json_schema`` form, json return format without the tag only), ``grammar``
    (GBNF), and ``unavailable`` (piece -> why it could not be built) when one
    is missing. Nothing for prompt mode.
    """
    if request is None:
        return {}
    out: dict[str, Any] = {"call_mode": request["call_mode"]}
    if request["call_mode"] == "native":
        out.update(tools=request["tools"], tool_choice=request["tool_choice"])
        return out
    for key in ("response_format", "grammar"):
        if request.get(key) is not None:
            out[key] = request[key]
    if request.get("unavailable"):
        out["unavailable"] = request["unavailable"]
    return out


def _request_summary(request: Mapping[str, Any] | None) -> str:
    """One readable line on what is sent beside the messages ("" in prompt mode)."""
    if request is None:
        return ""
    if request["call_mode"] == "native":
        names = ", ".join(t["function"]["name"] for t in request["tools"])
        return f"--- tools (native, tool_choice={request['tool_choice']}): {names or '(none)'}\n"
    sent = [k for k in ("response_format", "grammar") if request.get(k) is not None]
    return f"--- constrained: {', '.join(sent) or 'nothing can be built'} (see render --jsonl)\n"


def _render_conversations(args: argparse.Namespace, grid: Any, labels: Mapping[str, str]) -> int:
    """``render`` of a conversation dataset: each conversation in full, as each variant sends it, for the
    ground truth's trajectory (``render_conversation``: the calls of the ground truth, their real results)."""
    from promptgrid.matrix.conversations import render_conversation
    from promptgrid.matrix.conversations._dataset import select_conversations
    from promptgrid.matrix.running.session import make_renderer

    variants = grid.select(args.variant)
    conversations = select_conversations(args.dataset, cases=args.case, limit=args.limit, bfcl_data=args.bfcl_data)
    renderer = make_renderer(variants, template_dir=grid.template_dir, translation_store=args.store,
                             bfcl_data=args.bfcl_data)
    out = sys.stdout
    for conversation in conversations:
        for variant in variants:
            messages, request = render_conversation(conversation, variant, renderer=renderer)
            if args.jsonl:
                record = {"variant_id": variant.id, "case_id": conversation.id, "label": labels[variant.id],
                          "trajectory": "ground_truth", "messages": messages, **_request_fields(request)}
                out.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
                continue
            out.write(f"=== {escape_controls(conversation.id)} | {labels[variant.id]} | {variant.id} | the ground "
                      "truth's trajectory\n")
            for m in messages:
                text = m.get("content") or ""
                if m.get("tool_calls"):
                    text += ("\n" if text else "") + json.dumps(m["tool_calls"], ensure_ascii=False)
                if m.get("tool_call_id"):
                    text = f"[{m['tool_call_id']}] {text}"
                out.write(f"--- {m['role']}\n{escape_controls(text)}\n")
            out.write(escape_controls(_request_summary(request)))
            out.write("\n")
    return 0


def _render_run(args: argparse.Namespace, run_dir: Path) -> int:
    """``render RUN_DIR`` of a conversation run: the chosen episodes as they happened (``transcript_text``; with
    ``--jsonl`` one object per episode with its ``transcript_record``)."""
    from promptgrid.errors import RunError
    from promptgrid.matrix.conversations._export import (
        iter_transcripts,
        json_line,
        select_episodes,
        transcript_record,
        transcript_text,
    )
    from promptgrid.matrix.conversations._store import ConversationStore

    if args.store:
        raise RunError("--store is for rendering a grid over a dataset: render RUN_DIR rebuilds the prompts the "
                       "way the run's grid makes them, from the shipped catalogs.")
    with ConversationStore(run_dir) as store:
        episodes, labels = store.episodes(), dict(store.meta("labels", {}))
    chosen = select_episodes(episodes, models=args.model, variants=args.variant, cases=args.case,
                             repeats=args.repeat, labels=labels, limit=args.limit)
    if not chosen:
        print(f"{run_dir} has no episode stored yet.", file=sys.stderr)
        return 0
    conversations = None
    if args.dataset:  # where to read the conversations when the store's dataset cannot be read where it says
        from promptgrid.matrix.conversations._dataset import select_conversations

        conversations = select_conversations(args.dataset, cases=sorted({e.conversation_id for e in chosen}),
                                             bfcl_data=args.bfcl_data)
    out = sys.stdout
    for transcript in iter_transcripts(run_dir, chosen, conversations=conversations, bfcl_data=args.bfcl_data,
                                       labels=labels):
        if args.jsonl:
            e = transcript.episode
            out.write(json_line({"variant_id": e.variant_id, "case_id": e.conversation_id, "label": transcript.label,
                                 "trajectory": "run", "model": e.model, "repeat": e.repeat, "valid": e.valid,
                                 "failure_mode": e.failure_mode, "transcript": transcript_record(transcript)}))
        else:
            out.write(transcript_text(transcript) + "\n")
    return 0


def cmd_export_conversations(args: argparse.Namespace) -> int:
    """``promptgrid export`` of a conversation run: one JSON line per episode, ``EpisodeResult.to_dict()`` plus
    its ``transcript`` (``conversations._export``), to ``--output`` or standard output."""
    from promptgrid.matrix.conversations._export import export_records, json_line
    from promptgrid.matrix.conversations._store import CONVERSATION_STORE, ConversationStore
    from promptgrid.safeio import atomic_output

    run_dir = Path(args.run_dir)
    with ConversationStore(run_dir) as store:
        episodes = store.episodes()  # a damaged store is an error before anything is written
    lines = (json_line(record) for record in export_records(run_dir, episodes))
    if args.output:
        with atomic_output(args.output, inputs=[run_dir / CONVERSATION_STORE]) as fh:  # checked first; "-": stdout
            fh.writelines(lines)
        print(f"exported {len(episodes)} episodes to {args.output}", file=sys.stderr)
    else:
        sys.stdout.writelines(lines)
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    from promptgrid.matrix.conversations import is_conversation_run

    target = Path(args.grid)
    if is_conversation_run(target):
        return _render_run(args, target)
    _check_grid_options(args, target)
    from promptgrid.matrix.api import render
    from promptgrid.matrix.datasets import load_dataset

    grid = load_grid(args.grid)
    labels = {v.id: v.label for v in grid}
    from promptgrid.matrix.conversations import is_conversation_dataset

    if is_conversation_dataset(args.dataset):
        return _render_conversations(args, grid, labels)
    cases = load_dataset(args.dataset, bfcl_data=args.bfcl_data).select(case_ids=args.case or None, limit=args.limit)
    out = sys.stdout
    for prompt in render(grid, cases, variants=args.variant, translation_store=args.store, bfcl_data=args.bfcl_data):
        if args.jsonl:
            record = {
                "variant_id": prompt.variant_id,
                "case_id": prompt.case_id,
                "label": labels[prompt.variant_id],
                "messages": list(prompt.messages),
                **_request_fields(prompt.request),
                "sha256": prompt.sha256,
            }
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
        else:
            out.write(f"=== {prompt.case_id} | {labels[prompt.variant_id]} | {prompt.variant_id}\n")
            for m in prompt.messages:
                out.write(f"--- {m['role']}\n{escape_controls(m['content'])}\n")  # dataset text is untrusted
            out.write(escape_controls(_request_summary(prompt.request)))
            out.write("\n")
    return 0


def _check_grid_options(args: argparse.Namespace, target: Path) -> None:
    """``render GRID``: --dataset is needed; --model and --repeat choose episodes of a run directory only."""
    from promptgrid.errors import RunError
    from promptgrid.matrix.running.store import STORE_FILE

    if target.is_dir() and (target / STORE_FILE).is_file():
        raise RunError(f"{target} holds a single-turn run: render RUN_DIR shows a conversation run's episodes. "
                       f"promptgrid export {target} writes this run's answers.")
    if args.model or args.repeat:
        raise RunError("--model and --repeat choose the episodes of a conversation run: give its run directory "
                       "(render RUN_DIR), not a grid.")
    if not args.dataset:
        raise RunError("render GRID needs --dataset DS (the cases to render); or give a conversation run's "
                       "directory to see its episodes (render RUN_DIR).")
