"""A ground-truth run of BFCL multi-turn conversations as a user runs it: the whole ``promptgrid run`` command.

    .venv/bin/python benchmarks/multi_turn_run.py [--category multi_turn_base] [--rounds 3]
        [--old "/path/to/python /tmp/oldpg.py /tmp/old-tree"]

Times ``promptgrid run call_modes --dataset bfcl:CATEGORY --model fake/ground-truth --variant "json->python,False"``
into a fresh run directory (interpreter start, imports, loading, every step stored, the verdicts and the report
included), rounds interleaved and the best kept (the machine is shared). ``--old`` is the command prefix that runs
another checkout's CLI module (``PREFIX -m promptgrid.matrix.cli ...``); its time and the ratio are printed beside.
A run that exits with another status than 0 stops the script with its error output.

Set ``PYTHONDONTWRITEBYTECODE`` as a user's machine has it (unset: Python caches bytecode); the script says which.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _timed(prefix: list[str], category: str, run_dir: Path) -> float:
    shutil.rmtree(run_dir, ignore_errors=True)
    command = [*prefix, "-m", "promptgrid.matrix.cli", "run", "call_modes", "--dataset", f"bfcl:{category}",
               "--model", "fake/ground-truth", "--variant", "json->python,False", "--run-dir", str(run_dir)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=run_dir.parent)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{shlex.join(command)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--category", default="multi_turn_base")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--old", help="command prefix that runs another checkout's Python with its promptgrid")
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    work = Path(tempfile.mkdtemp(prefix="pg-mt-run-"))
    new_prefix = [sys.executable]
    old_prefix = shlex.split(args.old) if args.old else None
    new: list[float] = []
    old: list[float] = []
    try:
        for _ in range(args.rounds):
            new.append(_timed(new_prefix, args.category, work / "new"))
            if old_prefix:
                old.append(_timed(old_prefix, args.category, work / "old"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    caching = "off" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "on"
    print(f"ground-truth run of bfcl:{args.category}, whole command, bytecode caching {caching}")
    print(f"this tree: best {min(new):.2f} s (rounds: {', '.join(f'{s:.2f}' for s in new)})")
    if old:
        print(f"--old:     best {min(old):.2f} s (rounds: {', '.join(f'{s:.2f}' for s in old)})")
        print(f"speed-up old / new: {min(old) / min(new):.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
