"""Scoring speed of multi-turn result files: ``promptgrid score-file`` against bfcl-eval's checker, whole processes.

    .venv/bin/python benchmarks/multi_turn_score.py [--category multi_turn_base] [--rounds 3]

Writes a result file as bfcl-eval writes one (``{"id", "result": [[step, ...], ...]}``, a step the model's text)
of four trajectories per entry, 800 lines for a category of 200 entries:

- ``truth``: BFCL's own ground-truth strings (positional arguments included), one step per turn, then a
  closing sentence;
- ``drop``: the same with the last call of the entry's longest turn left out;
- ``repeat``: the same with the first call of the first non-empty turn made twice;
- ``strings``: the same with every number written as a string.

Then times, as whole commands (interpreter start, imports, loading, scoring, writing), rounds interleaved and the
best kept (the machine is shared):

- ``promptgrid score-file FILE --dataset bfcl:CATEGORY --output OUT``;
- bfcl-eval's checker on the same lines: a script that does what its eval runner does per line (each step's text
  decoded into call strings — its handler's ``decode_execute`` needs tree-sitter, which is not installed, so the
  list's calls are split with ``ast`` here, a cost that is lower than its own — then ``multi_turn_checker``).

It prints both times, the ratio, and how many verdicts agree (validity per line).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

_REFERENCE = r'''
import ast, json, sys, warnings
from pathlib import Path
warnings.simplefilter("ignore")
import bfcl_eval
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker
data = Path(bfcl_eval.__file__).parent / "data"
category = sys.argv[1]
entries = {e["id"]: e for e in map(json.loads, open(data / f"BFCL_v4_{category}.json"))}
answers = data / "possible_answer" / f"BFCL_v4_{category}.json"
truth = {e["id"]: e["ground_truth"] for e in map(json.loads, open(answers))}

def decode(text):
    text = text.strip("`\n ")
    text = text if text.startswith("[") else "[" + text
    text = text if text.endswith("]") else text + "]"
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError:
        return []
    return [ast.unparse(node) for node in getattr(tree, "elts", []) if isinstance(node, ast.Call)]

out = []
for number, line in enumerate(open(sys.argv[2])):
    record = json.loads(line)
    decoded = [[calls for calls in (decode(step) for step in turn) if calls] for turn in record["result"]]
    entry = dict(entries[record["id"]])
    entry.pop("function", None)
    result = multi_turn_checker(decoded, truth[record["id"]], entry, category, f"ref_{number}")
    out.append(bool(result["valid"]))
json.dump(out, open(sys.argv[3], "w"))
'''


def _strings(text: str) -> str:
    """A call string with every number literal written as a string (``budget_limit=2857.14`` ->
    ``budget_limit='2857.14'``)."""
    import ast

    tree = ast.parse(text, mode="eval")

    class Quote(ast.NodeTransformer):
        def visit_Constant(self, node: ast.Constant) -> Any:
            if isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
                return ast.copy_location(ast.Constant(repr(node.value)), node)
            return node

    return ast.unparse(Quote().visit(tree))


def result_lines(category: str) -> list[dict[str, Any]]:
    import bfcl_eval

    data = Path(bfcl_eval.__file__).parent / "data" / "possible_answer" / f"BFCL_v4_{category}.json"
    lines = []
    for entry in map(json.loads, data.open(encoding="utf-8")):
        truth: list[list[str]] = entry["ground_truth"]
        longest = max(range(len(truth)), key=lambda t: len(truth[t]))
        first = next((t for t, calls in enumerate(truth) if calls), 0)
        kinds = {
            "truth": truth,
            "drop": [calls[:-1] if t == longest else calls for t, calls in enumerate(truth)],
            "repeat": [calls[:1] + calls if t == first else calls for t, calls in enumerate(truth)],
            "strings": [[_strings(call) for call in calls] for calls in truth],
        }
        for kind, turns in kinds.items():
            lines.append({"id": entry["id"], "kind": kind,
                          "result": [[f"[{', '.join(calls)}]", "I have done that."] if calls else ["Nothing to do."]
                                     for calls in turns]})
    return lines


def _timed(command: list[str]) -> float:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command[:4])} failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--category", default="multi_turn_base")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pg-mt-score-"))
    lines = result_lines(args.category)
    results = work / "results.jsonl"
    results.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    reference = work / "reference.py"
    reference.write_text(_REFERENCE, encoding="utf-8")
    ours_out, theirs_out = work / "scored.jsonl", work / "reference.json"
    ours_cmd = [sys.executable, "-m", "promptgrid.matrix.cli", "score-file", str(results), "--dataset",
                f"bfcl:{args.category}", "--output", str(ours_out)]
    theirs_cmd = [sys.executable, str(reference), args.category, str(results), str(theirs_out)]
    ours, theirs = [], []
    for _ in range(args.rounds):
        ours.append(_timed(ours_cmd))
        theirs.append(_timed(theirs_cmd))
    scored = [json.loads(line) for line in ours_out.read_text(encoding="utf-8").splitlines()]
    reference_valid = json.loads(theirs_out.read_text(encoding="utf-8"))
    agree = sum(s["valid"] == r for s, r in zip(scored, reference_valid, strict=True))
    print(f"{len(lines)} trajectories of bfcl:{args.category} ({', '.join(sorted({line['kind'] for line in lines}))})")
    print(f"promptgrid score-file, whole process:   best {min(ours):.2f} s (rounds: "
          f"{', '.join(f'{s:.2f}' for s in ours)})")
    print(f"bfcl-eval multi_turn_checker, whole process: best {min(theirs):.2f} s (rounds: "
          f"{', '.join(f'{s:.2f}' for s in theirs)})")
    print(f"ratio promptgrid / bfcl-eval: {min(ours) / min(theirs):.2f}")
    print(f"verdicts agree on {agree} of {len(lines)} lines (promptgrid valid {sum(s['valid'] for s in scored)}, "
          f"bfcl-eval valid {sum(reference_valid)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
