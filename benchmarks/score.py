"""Scoring speed: promptgrid versus bfcl-eval on the agreement corpus, in one run.

    .venv/bin/python benchmarks/score.py [--fraction F] [--rounds R] [--seed S]

The corpus is the one tests/matrix/check/test_bfcl_agreement.py checks: for
every (config, entry) of bfcl:format_sensitivity (26 x 200) a correct response
in the requested format plus its corrupted variants (``--fraction`` of the
pairs get corruptions; 1.0 = all, about 63,500 responses).

Timed, each on every response, rounds interleaved and the best round kept
(the machine is shared, so the minimum is the least disturbed measurement):

- bfcl-eval: what its format-sensitivity runner does per entry: parse the
  config string, ``default_decode_ast_prompting``, the output-format check,
  ``ast_checker`` (the same calls as ``_evaluate_single_ast_entry``);
- promptgrid ``score()``: the full ``Verdict`` (bfcl-eval's verdict plus
  failure mode, format-agnostic validity, FSA, ITC counts, format match,
  language of free-text answers), its memos cleared before each round;
- promptgrid ``score()`` with its memos disabled (every response parsed and checked);
- promptgrid's bfcl-equivalent verdict only (strict parse + check).

Prints the times, responses per second and each ratio to bfcl-eval.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parents[1]


def _helper() -> ModuleType:
    path = ROOT / "tests" / "matrix" / "check" / "bfcl_reference.py"
    spec = importlib.util.spec_from_file_location("_promptgrid_bfcl_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _time(fn: Callable[[], Any]) -> float:
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fraction", type=float, default=1.0, help="share of (config, entry) pairs corrupted")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--by-kind", action="store_true", help="also time each response kind (memos off)")
    args = parser.parse_args(argv)

    helper = _helper()
    reference = helper.load_reference()
    if reference is None:
        print("bfcl-eval is not installed: pip install --no-deps bfcl-eval==2026.3.23", file=sys.stderr)
        return 2

    from promptgrid.matrix import scoring
    from promptgrid.matrix.check import compile_case
    from promptgrid.matrix.datasets import load_dataset
    from promptgrid.matrix.metrics import DEFAULT_LANGUAGES
    from promptgrid.matrix.parse import parse_response
    from promptgrid.variants import load_grid

    configs, entries = helper.load_entries()
    items = helper.build_corpus(configs, entries, corrupt_fraction=args.fraction, seed=args.seed)
    by_id = {e.id: e for e in entries}
    cases = {c.id: c for c in load_dataset("bfcl:format_sensitivity").cases}
    variants = {v.id: v for v in load_grid("bfcl_v4").variants}
    # Resolve lookups outside the timed loops, for both sides alike.
    ours_rows = [(it.text, variants[it.config], cases[it.entry_id]) for it in items]
    theirs_rows = [(it.text, it.config, it.entry_id, by_id[it.entry_id]) for it in items]
    distinct = len({(it.text, variants[it.config].return_format, variants[it.config].tool_call_tag) for it in items})

    # Warm-up outside the timings: langid's model (about 2 s), compiled cases, imports.
    scoring.score("warm up", ours_rows[0][1], ours_rows[0][2])
    for _text, _variant, case in ours_rows:
        compile_case(case)

    def run_bfcl() -> None:
        verdict = reference.verdict
        for text, config, entry_id, entry in theirs_rows:
            verdict(text, config, entry_id, entry.functions, entry.ground_truth)

    def run_score() -> None:
        scoring.clear_caches()
        score = scoring.score
        for text, variant, case in ours_rows:
            score(text, variant, case)

    def run_score_nomemo() -> None:
        original = scoring._parse
        scoring._parse = parse_response  # type: ignore[assignment]
        score = scoring._score.__wrapped__  # the verdict memo off too
        try:
            for text, variant, case in ours_rows:
                score(text, variant.return_format, variant.tool_call_tag, case, DEFAULT_LANGUAGES)
        finally:
            scoring._parse = original

    def run_equivalent() -> None:
        check = scoring._bfcl_check
        for text, variant, case in ours_rows:
            fmt, tag = variant.return_format, variant.tool_call_tag
            check(parse_response(text, fmt, tag), compile_case(case), fmt, tag)

    runs = {"bfcl-eval decode + ast_checker": run_bfcl,
            "promptgrid score() (full Verdict)": run_score,
            "promptgrid score(), memos off": run_score_nomemo,
            "promptgrid strict parse + check only": run_equivalent}
    best = {name: float("inf") for name in runs}
    for _ in range(args.rounds):
        for name, fn in runs.items():
            best[name] = min(best[name], _time(fn))

    n = len(items)
    print(f"corpus: {n} responses ({distinct} distinct (text, format, tag)), "
          f"{len(configs)} configs x {len(entries)} entries, corruption fraction {args.fraction}")
    print(f"best of {args.rounds} interleaved rounds")
    base = best["bfcl-eval decode + ast_checker"]
    for name, seconds in best.items():
        print(f"  {name:38s} {seconds:7.2f} s  {n / seconds:9.0f} responses/s  "
              f"bfcl-eval / this = {base / seconds:5.2f}x")
    if args.by_kind:
        _by_kind(items, theirs_rows, ours_rows, reference, scoring, parse_response, DEFAULT_LANGUAGES)
    ratio = base / best["promptgrid score() (full Verdict)"]
    print(f"promptgrid score() is {ratio:.2f}x as fast as bfcl-eval (target >= 2x): "
          f"{'OK' if ratio >= 2 else 'BELOW TARGET'}")
    return 0


def _by_kind(items: Any, theirs_rows: Any, ours_rows: Any, reference: Any, scoring: Any, parse: Any,
             languages: Any) -> None:
    """Per response kind: bfcl-eval versus score() without memos (where the time goes)."""
    from collections import defaultdict

    groups: dict[str, list[int]] = defaultdict(list)
    for i, item in enumerate(items):
        groups[item.kind].append(i)
    original = scoring._parse
    scoring._parse = parse
    score = scoring._score.__wrapped__
    print(f"  {'kind':20s} {'n':>6s} {'bfcl-eval us':>13s} {'score() us':>11s}  ratio")
    try:
        for kind, index in sorted(groups.items()):
            t_bfcl = _time(lambda: [reference.verdict(theirs_rows[i][0], theirs_rows[i][1], theirs_rows[i][2],
                                                      theirs_rows[i][3].functions, theirs_rows[i][3].ground_truth)
                                    for i in index])
            t_ours = _time(lambda: [score(ours_rows[i][0], ours_rows[i][1].return_format,
                                          ours_rows[i][1].tool_call_tag, ours_rows[i][2], languages) for i in index])
            print(f"  {kind:20s} {len(index):6d} {t_bfcl / len(index) * 1e6:13.1f} {t_ours / len(index) * 1e6:11.1f}"
                  f"  {t_bfcl / t_ours:5.2f}x")
    finally:
        scoring._parse = original


if __name__ == "__main__":
    sys.exit(main())
