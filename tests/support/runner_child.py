"""A `promptgrid run` in a child process, on stand-in cases (for kill / Ctrl-C / two-writer tests).

Usage (``support.running.child_command`` / ``child_env`` build it):
    PYTHONPATH=tests python -m support.runner_child '{"run_dir": ..., "api_base": ..., "cases": N, "variants": N, ...}'
(``"batch": true`` sends through the server's batch API, polling every ``"poll"`` seconds.)
Prints the run summary as JSON on the last line of stdout; exits with `promptgrid run`'s code.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from promptgrid.errors import PromptgridError
from promptgrid.matrix.api import Run
from promptgrid.matrix.cli.run import print_run
from promptgrid.matrix.running.session import BatchMode, execute
from support.builders import bfcl_variants, numbered_cases
from support.running import config, prepared, stand_in_score


def main() -> int:
    opts = json.loads(sys.argv[1])
    cfg = config(Path(opts["run_dir"]), api_base=opts["api_base"], model=opts.get("model", "openai/fake-model"),
                 concurrency=opts.get("concurrency", 8), timeout=opts.get("timeout", 30.0),
                 max_retries=opts.get("max_retries", 5))
    prep = prepared(cfg, bfcl_variants(opts.get("variants", 26)), numbered_cases(opts.get("cases", 10)))
    try:
        batch = BatchMode(wait=True, poll_s=opts.get("poll", 0.05)) if opts.get("batch") else None
        summary = asyncio.run(execute(prep, progress=opts.get("progress", False), scorer=stand_in_score,
                                      batch=batch))
    except PromptgridError as exc:
        print(f"promptgrid: error: {exc}", file=sys.stderr)
        return exc.exit_code
    code = print_run(Run(cfg.run_dir, summary=summary), sys.stdout, sys.stderr)
    print(json.dumps(summary.to_dict()))
    return code


if __name__ == "__main__":
    sys.exit(main())
