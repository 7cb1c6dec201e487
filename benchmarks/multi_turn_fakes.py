"""The offline fakes through BFCL's multi-turn categories, in every call mode (issue 23's "done when").

    python benchmarks/multi_turn_fakes.py [--limit N] [--categories base,miss_func,...] [--models ...]

For each category (``bfcl:multi_turn_base``, ``_miss_func``, ``_miss_param``,
``_long_context``), each scripted model (``fake/ground-truth``,
``fake/prose``, ``fake/hostile``) and each call mode (prompt, native,
constrained: the default prompt of bfcl-eval, python return format, JSON
docs, no tag), ``pg``'s conversation runner takes every entry through its
turns and prints: episodes valid / finished, errors, steps, the slowest
environment step and the largest worker peak memory, and the wall time.
The hostile model runs in a fresh working directory; the script checks that
its canary file (``CANARY``) is absent there and in /tmp afterwards.

Needs bfcl-eval installed (the data and the API classes). No network.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

from tabulate import tabulate

from promptgrid.matrix.conversations import CANARY, load_conversations
from promptgrid.matrix.running.config import ModelSpec, RunConfig
from promptgrid.matrix.running.conversation_runner import arun_episodes
from promptgrid.variants import Variant

MODES = {"prompt": Variant(), "native": Variant(call_mode="native"), "constrained": Variant(call_mode="constrained")}
CATEGORIES = ("base", "miss_func", "miss_param", "long_context")
MODELS = ("fake/ground-truth", "fake/prose", "fake/hostile")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=None, help="entries per category (default: all 200)")
    ap.add_argument("--categories", default=",".join(CATEGORIES))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--hostile-categories", default="base", help="categories the hostile model runs on")
    ap.add_argument("--concurrency", type=int, default=4)
    args = ap.parse_args()
    rows = []
    canaries = []
    for category in args.categories.split(","):
        conversations = load_conversations(f"bfcl:multi_turn_{category}", limit=args.limit)
        for model in args.models.split(","):
            if model == "fake/hostile" and category not in args.hostile_categories.split(","):
                continue
            with tempfile.TemporaryDirectory(prefix="pg-mt-") as tmp:
                cwd = os.getcwd()
                os.chdir(tmp)
                try:
                    started = time.perf_counter()
                    config = RunConfig(grid="", dataset="", models=(ModelSpec(model, concurrency=args.concurrency),),
                                       run_dir=Path(tmp) / "run")
                    summary = asyncio.run(arun_episodes(config, list(MODES.values()), conversations))
                    wall = time.perf_counter() - started
                    if model == "fake/hostile":
                        canaries.append(Path(tmp, CANARY).exists() or Path("/tmp", CANARY).exists())
                finally:
                    os.chdir(cwd)
            for mode, variant in MODES.items():
                results = [r for r in summary.results if r.variant_id == variant.id]
                finished = [r for r in results if r.valid is not None]
                modes = Counter(r.failure_mode for r in finished if not r.valid).most_common(2)
                env = [r.details.get("environment", {}) for r in results]
                rows.append([category, model, mode, f"{sum(bool(r.valid) for r in finished)}/{len(finished)}",
                             sum(r.error is not None for r in results), sum(r.steps for r in results),
                             max((e.get("slowest_step_s", 0.0) for e in env), default=0.0),
                             max((e.get("peak_memory_mb", 0.0) for e in env), default=0.0),
                             ", ".join(f"{m} {n}" for m, n in modes), f"{wall:.0f}"])
    print(tabulate(rows, headers=["category", "model", "mode", "valid", "errors", "steps", "slowest env step s",
                                  "peak env MiB", "top failure modes", "wall s (3 modes)"], tablefmt="github"))
    if canaries:
        print(f"\nhostile runs: {len(canaries)}; canary file created: {'YES' if any(canaries) else 'no'}")


if __name__ == "__main__":
    main()
