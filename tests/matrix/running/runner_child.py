"""A `promptgrid run` in a child process, on stand-in cases (for kill / Ctrl-C / two-writer tests).

Usage: python runner_child.py '{"run_dir": ..., "api_base": ..., "cases": N, "variants": N, ...}'
Prints the run summary as JSON on the last line of stdout; exits with execute()'s code.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from runner_support import bfcl_variants, config, make_cases, prepared, stand_in_score  # noqa: E402

from promptgrid.matrix.cli.run import execute
from promptgrid.errors import PromptgridError


def main() -> int:
    opts = json.loads(sys.argv[1])
    cfg = config(Path(opts["run_dir"]), api_base=opts["api_base"], model=opts.get("model", "openai/fake-model"),
                 concurrency=opts.get("concurrency", 8), timeout=opts.get("timeout", 30.0),
                 max_retries=opts.get("max_retries", 5))
    prep = prepared(cfg, bfcl_variants(opts.get("variants", 26)), make_cases(opts.get("cases", 10)))
    try:
        code, summary = execute(prep, progress=opts.get("progress", False), scorer=stand_in_score)
    except PromptgridError as exc:
        print(f"promptgrid: error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(json.dumps(summary.to_dict()))
    return code


if __name__ == "__main__":
    sys.exit(main())
