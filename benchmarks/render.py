"""Render benchmark: the 5200 BFCL V4 format-sensitivity prompts, promptgrid vs bfcl-eval, in one run.

    .venv/bin/python benchmarks/render.py [--repeat 5]

Both sides start from loaded data (not timed) and produce the complete chat
messages for all 26 configs x 200 entries:

* promptgrid: a NEW ``Renderer`` (Jinja environment, template compilation and
  empty caches included in the time) renders ``Prompt`` records for the
  ``bfcl_v4`` grid x ``load_bfcl('format_sensitivity')``;
* bfcl-eval: ``system_prompt_pre_processing_chat_model`` (its
  ``formulate_system_prompt`` plus the message assembly) for each of its 5200
  format-sensitivity entries, on a fresh copy of the entry's messages (it
  edits them in place). ``formulate_system_prompt`` alone is timed too.

Before timing, the script checks that both sides produced identical messages.
Each side is timed ``--repeat`` times, the sides interleaved so that they
see the same machine load, with the cyclic garbage collector paused as
``timeit`` does; the best time of each is reported. Needs bfcl-eval installed (``pip install --no-deps bfcl-eval``).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from promptgrid.matrix.datasets._bfcl import load_bfcl
from promptgrid.templates import Renderer
from promptgrid.variants import load_grid

ROOT = Path(__file__).resolve().parents[1]


def _bfcl_modules() -> tuple[Any, Any]:
    """bfcl_eval.utils and bfcl-eval's model_handler/utils.py (run with stand-ins, see tests/support/bfcl.py)."""
    spec = importlib.util.spec_from_file_location("_promptgrid_bfcl_support", ROOT / "tests" / "support" / "bfcl.py")
    assert spec is not None and spec.loader is not None
    support = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(support)
    os.environ.setdefault("BFCL_PROJECT_ROOT", tempfile.mkdtemp(prefix="bfcl-root-"))
    loaded = support.load_bfcl_modules("bfcl_eval.model_handler.utils")
    if loaded is None:
        sys.exit("bfcl-eval is not installed: pip install --no-deps bfcl-eval")
    from bfcl_eval import utils

    return utils, loaded[0]


def _timed(fn: Callable[[], Any]) -> float:
    """Seconds one call takes, with the cyclic GC paused (as ``timeit`` does)."""
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    finally:
        gc.enable()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed repetitions per side (best is reported)")
    args = parser.parse_args(argv)

    utils, model_utils = _bfcl_modules()
    entries = utils.load_dataset_entry("format_sensitivity")
    jobs_bfcl = [(e["id"], e["id"].split(":")[1], e["question"][0], e["function"]) for e in entries]

    grid = load_grid("bfcl_v4")
    variants = {v.id: v for v in grid.variants}
    cases = {c.id: c for c in load_bfcl("format_sensitivity")}
    jobs_ours = [(variants[e["id"].split(":")[1]], cases[e["id"].split(":")[2]]) for e in entries]

    pre_process = model_utils.system_prompt_pre_processing_chat_model
    formulate = model_utils.formulate_system_prompt

    def run_bfcl() -> list[list[dict[str, str]]]:
        return [pre_process([dict(m) for m in question], functions, entry_id)
                for entry_id, _config, question, functions in jobs_bfcl]

    def run_bfcl_formulate_only() -> int:
        return sum(len(formulate(config, functions)) for _id, config, _q, functions in jobs_bfcl)

    def run_ours() -> list[Any]:
        renderer = Renderer()
        return [renderer.render(variant, case) for variant, case in jobs_ours]

    # correctness first: the two sides must produce the same messages
    ours = [list(p.messages) for p in run_ours()]
    theirs = run_bfcl()
    if ours != theirs:
        bad = sum(a != b for a, b in zip(ours, theirs, strict=True))
        print(f"MISMATCH: {bad} of {len(ours)} prompts differ", file=sys.stderr)
        return 1

    # interleaved, so that both sides see the same machine load; the best of each is kept
    t_bfcl = t_formulate = t_ours = float("inf")
    for _ in range(args.repeat):
        t_bfcl = min(t_bfcl, _timed(run_bfcl))
        t_formulate = min(t_formulate, _timed(run_bfcl_formulate_only))
        t_ours = min(t_ours, _timed(run_ours))
    n = len(jobs_ours)
    print(f"prompts rendered (identical on both sides): {n}")
    print(f"bfcl-eval system_prompt_pre_processing_chat_model: {t_bfcl:8.3f} s  ({t_bfcl / n * 1e6:7.1f} us/prompt)")
    print(f"bfcl-eval formulate_system_prompt only:             {t_formulate:8.3f} s  "
          f"({t_formulate / n * 1e6:7.1f} us/prompt)")
    print(f"promptgrid Renderer (new renderer, full messages):  {t_ours:8.3f} s  ({t_ours / n * 1e6:7.1f} us/prompt)")
    print(f"speed-up vs bfcl-eval messages: {t_bfcl / t_ours:5.2f}x   vs formulate_system_prompt only: "
          f"{t_formulate / t_ours:5.2f}x   (best of {args.repeat})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
