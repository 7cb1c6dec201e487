"""Benchmark: whole-process times of everyday commands, as a user types them.

Each command runs as its own ``promptgrid`` process (the interpreter, the
imports and the work), ``--repeat`` times, in a temporary folder with its own
``XDG_CACHE_HOME`` (the default translation store and the kept check results,
``translate._memo``, live there). Printed per command: the best and the
median wall time, and the CPU time (user + system) of the median run, which
moves less when other processes share the cores. Rows:

- ``check-translations``, with no kept results (``cold``: the language model
  is decoded from langid's wheel and 2,264 translations are checked; ``cold,
  after install``: the same with the decoded model that ``scripts/install.sh``
  leaves in the user cache) and with them (``warm``);
- ``translate --backend catalog --dataset mini --to de,ja`` into a new store,
  cold and warm;
- the translate backend errors a user meets first: an unknown fake model,
  ``llm:local/smollm2-135m`` (not installed, or installed), an unknown
  backend, an ``--api-key-env`` that is not set;
- ``status`` and ``report`` of a 52-row study (``bfcl_v4``, 2 ``mini``
  cases, ``fake/auto``: made once before timing);
- a fully cached rerun of the README demo (``run demo --dataset mini:en
  --limit 10``) with ``fake/auto`` in place of ``local/smollm2-135m``
  (``--demo-model`` to choose), run once before timing.

Run::

    .venv/bin/python benchmarks/everyday.py [--repeat 3] [--only check,translate]

Exit status 0; the table is the result (``--limit S`` exits 1 when a median is
S seconds or more).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROMPTGRID = [sys.executable, "-m", "promptgrid.matrix.cli"]


def _timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, int]:
    """(wall s, CPU s of the child, exit code) of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([*PROMPTGRID, *argv], env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated row groups: check, translate, errors, study, "
                        "demo (default: all)")
    parser.add_argument("--demo-model", default="fake/auto")
    parser.add_argument("--limit", type=float, default=None, help="exit 1 when a median wall time reaches this")
    args = parser.parse_args()
    groups = set(filter(None, args.only.split(","))) or {"check", "translate", "errors", "study", "demo"}

    work = Path(tempfile.mkdtemp(prefix="promptgrid-everyday-"))
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("PROMPTGRID_TEST_UNSET_KEY", None)
    rows: list[tuple[str, float, float, float, int]] = []

    def cache(name: str) -> dict[str, str]:
        folder = work / "cache" / name
        folder.mkdir(parents=True, exist_ok=True)
        return {**env, "XDG_CACHE_HOME": str(folder)}

    def measure(label: str, argv: list[str], *, fresh: bool = False, cold: bool = False,
                prepare: list[str] | None = None, installed: bool = False) -> None:
        walls, cpus, codes = [], [], []
        for i in range(args.repeat):
            run_env = cache(f"{label}-{i}") if cold else cache(label)
            if installed:  # what scripts/install.sh leaves in the user cache: the decoded language model
                subprocess.run([sys.executable, "-c", "from promptgrid.languages import cache_model; cache_model()"],
                               env=run_env, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               check=False)
            if prepare is not None and (cold or i == 0):
                subprocess.run([*PROMPTGRID, *prepare], env=run_env, cwd=work, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, check=False)
            call = [a.replace("{i}", str(i)) for a in argv] if fresh else argv
            wall, cpu, code = _timed(call, run_env, work)
            walls.append(wall)
            cpus.append(cpu)
            codes.append(code)
        median = statistics.median(walls)
        rows.append((label, min(walls), median, cpus[walls.index(sorted(walls)[len(walls) // 2])], codes[-1]))
        print(f"  {label}: {median:.2f} s", file=sys.stderr, flush=True)

    try:
        if "check" in groups:
            measure("check-translations (cold)", ["check-translations"], cold=True)
            measure("check-translations (cold, after install)", ["check-translations"], cold=True, installed=True)
            measure("check-translations (warm)", ["check-translations"], prepare=["check-translations"])
        if "translate" in groups:
            catalog = ["translate", "--to", "de,ja", "--backend", "catalog", "--dataset", "mini", "--store",
                       "store-{i}.sqlite3"]
            measure("translate catalog mini de,ja (cold)", catalog, fresh=True, cold=True)
            measure("translate catalog mini de,ja (cold, after install)", catalog, fresh=True, cold=True,
                    installed=True)
            measure("translate catalog mini de,ja (warm)", [*catalog[:-1], "w-{i}.sqlite3"], fresh=True,
                    prepare=[*catalog[:-1], "prep.sqlite3"])
        if "errors" in groups:
            base = ["translate", "--to", "de", "--what", "instructions", "--store", "err.sqlite3"]
            measure("error: --backend llm:fake/nope", [*base, "--backend", "llm:fake/nope"])
            measure("--backend llm:local/smollm2-135m (an error when not installed)",
                    [*base[:-1], "local-{i}.sqlite3", "--backend", "llm:local/smollm2-135m"], fresh=True)
            measure("error: --backend deepl", [*base, "--backend", "deepl"])
            measure("error: --api-key-env unset", [*base, "--backend", "llm:openai/m", "--api-key-env",
                                                   "PROMPTGRID_TEST_UNSET_KEY"])
        if "study" in groups:
            study = work / "study"
            made = subprocess.run([*PROMPTGRID, "run", "bfcl_v4", "--dataset", "mini", "--model", "fake/auto",
                                   "--limit", "2", "--run-dir", str(study)], env=env, cwd=work,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
            if made.returncode == 0:
                measure("status RUN (52 rows)", ["status", str(study)])
                measure("report RUN (52 rows)", ["report", str(study)])
            else:
                print(f"  the 52-row study could not be made: {made.stderr.strip()[-300:]}", file=sys.stderr)
        if "demo" in groups:
            demo = ["run", "demo", "--dataset", "mini:en", "--model", args.demo_model, "--limit", "10",
                    "--max-tokens", "1024", "--run-dir", str(work / "demo")]
            measure(f"README demo rerun, all cached ({args.demo_model})", demo, prepare=demo)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    width = max(len(r[0]) for r in rows)
    print(f"{'command'.ljust(width)}  {'best s':>7}  {'median s':>8}  {'cpu s':>6}  exit")
    for label, best, median, cpu, code in rows:
        print(f"{label.ljust(width)}  {best:7.2f}  {median:8.2f}  {cpu:6.2f}  {code:>4}")
    if args.limit is not None and any(r[2] >= args.limit for r in rows):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
