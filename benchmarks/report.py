"""Benchmark: render the full report of a 2-model x 26-variant x 40-case run (synthetic rows).

All formats, figures included (Markdown, CSV, LaTeX, JSON, HTML, PNG and SVG).
The target is under 10 seconds of wall time. Run:

    .venv/bin/python benchmarks/report.py [--repeat 3] [--out DIR] [--resamples 2000]

Prints the wall and CPU time of each build (aggregation and rendering,
matplotlib import excluded from the first by a warm-up import) and exits
non-zero when the best build takes 10 s or more.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from promptgrid.matrix.report import build_report, synthetic_rows  # noqa: E402

LIMIT_S = 10.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=None, help="keep the report here (default: a temporary directory)")
    parser.add_argument("--resamples", type=int, default=2000)
    args = parser.parse_args()

    rows = synthetic_rows(models=("acme/large-2", "acme/small-1"), grid="bfcl_v4", n_cases=40, seed=0)
    print(f"{len(rows):,} rows: 2 models x 26 variants x 40 cases; {args.resamples:,} bootstrap resamples")
    import matplotlib  # noqa: F401  - measured separately: a CLI process pays it once

    t0 = time.perf_counter()
    import matplotlib.figure  # noqa: F401

    print(f"matplotlib import: {time.perf_counter() - t0:.2f} s")
    walls = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out) if args.out else Path(tmp) / "report"
        for i in range(args.repeat):
            w0, c0 = time.perf_counter(), time.process_time()
            result = build_report(rows, out, baseline=None, formats={"all"}, n_resamples=args.resamples)
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            walls.append(wall)
            size = sum(p.stat().st_size for p in result.files)
            print(f"build {i + 1}: {wall:.2f} s wall, {cpu:.2f} s CPU, {len(result.files)} files, {size / 1e6:.2f} MB")
    best = min(walls)
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    verdict = "OK" if best < LIMIT_S else "TOO SLOW"
    print(
        f"best {best:.2f} s (limit {LIMIT_S:.0f} s): {verdict}; 1-min load average {load:.1f} on {os.cpu_count()} CPUs"
    )
    return 0 if best < LIMIT_S else 1


if __name__ == "__main__":
    sys.exit(main())
