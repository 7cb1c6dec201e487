"""Handlers of the commands that need no model: grids, datasets, grid show, render.

They import only variants, templates and datasets (``render`` is
``promptgrid.render``), so they start fast (no litellm, no matplotlib).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any

from tabulate import tabulate

from promptgrid.display import escape_controls
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


def cmd_render(args: argparse.Namespace) -> int:
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
