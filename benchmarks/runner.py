"""Runner throughput and memory, against the fake OpenAI-compatible server.

    .venv/bin/python benchmarks/runner.py                 # 5,200 calls + 10k/100k memory
    .venv/bin/python benchmarks/runner.py --cases 100 --skip-memory

1. Throughput. The fake server (its own process) answers after 100 ms. Two
   clients send the same prompts (grid bfcl_v4 x the first N ``mini`` cases),
   64 at a time, each in a fresh process:
   - baseline: a bare ``asyncio.gather`` over ``litellm.acompletion`` with a
     semaphore of 64 (the ceiling: litellm itself costs ~4 ms CPU per call);
   - ``promptgrid run`` (the CLI, in a subprocess), which also renders,
     deduplicates, rate-limits, stores and scores every answer.
   Both rates are calls/s over the sending phase (first call to last answer);
   promptgrid's end-to-end wall time (imports and planning included) is shown
   too. CPU ms per call is the process CPU time over the run / calls
   (promptgrid's includes rendering, planning and scoring). On a shared
   machine the load of other processes moves single measurements by +-15%,
   so the pair is measured ``--rounds`` times, in alternating order, and the
   median ratio is reported.
2. Memory. ``promptgrid run`` with the in-process ``fake/auto`` model (no
   HTTP, no litellm: the 100k run would otherwise take ~8 minutes) at 10,764
   and 107,640 jobs (mini x bfcl_v4, 1 and 10 repeats): peak RSS must not grow
   with the number of finished jobs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PY = sys.executable

BASELINE = textwrap.dedent("""
    import asyncio, json, os, resource, sys, time
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm
    from promptgrid.matrix.datasets import load_dataset
    from promptgrid.templates import Renderer
    from promptgrid.variants import load_grid
    url, n_cases, conc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    grid = load_grid("bfcl_v4")
    cases = load_dataset("mini").cases[:n_cases]
    r = Renderer()
    prompts = [list(r.render(v, c).messages) for c in cases for v in grid.variants]
    async def main():
        sem = asyncio.Semaphore(conc)
        async def one(m):
            async with sem:
                resp = await litellm.acompletion(model="openai/fake-model", messages=m, api_base=url,
                                                 api_key="no-key-needed", temperature=0.0, max_tokens=512,
                                                 timeout=120, max_retries=0, drop_params=True)
                return resp.choices[0].message.content
        t, c = time.perf_counter(), time.process_time()
        out = await asyncio.gather(*(one(m) for m in prompts))
        return len(out), time.perf_counter() - t, time.process_time() - c
    n, wall, cpu = asyncio.run(main())
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"calls": n, "exec_s": wall, "cpu_s": cpu, "peak_rss_mb": rss}))
""")


def _run(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, str, str]:
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env or {**os.environ}, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    return time.perf_counter() - t, proc.stdout, proc.stderr


def _invocation(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())["invocations"][-1]["summary"]


def _baseline(url: str, n_cases: int, concurrency: int, env: dict[str, str]) -> dict:
    _, stdout, _ = _run([PY, "-c", BASELINE, url, str(n_cases), str(concurrency)], env)
    b = json.loads(stdout.strip().splitlines()[-1])
    return {"calls": b["calls"], "calls_per_s": b["calls"] / b["exec_s"],
            "cpu_ms_per_call": 1000 * b["cpu_s"] / b["calls"], "peak_rss_mb": b["peak_rss_mb"]}


def _promptgrid(url: str, n_cases: int, concurrency: int, env: dict[str, str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        wall, _, _ = _run([PY, "-m", "promptgrid.matrix.cli", "run", "bfcl_v4", "--dataset", "mini",
                           "--limit", str(n_cases), "--model", "openai/fake-model", "--api-base", url,
                           "--concurrency", str(concurrency), "--timeout", "120", "--run-dir", str(run_dir),
                           "--no-progress"], env)
        pg = _invocation(run_dir)
    return {"calls": pg["sent"], "calls_per_s": pg["calls_per_s"],
            "cpu_ms_per_call": 1000 * pg["cpu_s"] / max(1, pg["sent"]), "peak_rss_mb": pg["peak_rss_mb"],
            "wall_s": wall, "end_to_end_calls_per_s": pg["sent"] / wall}


def throughput(n_cases: int, concurrency: int, latency: float, rounds: int) -> dict:
    """``rounds`` x (baseline, promptgrid), the order alternating, so load from other processes on a
    shared machine falls on both alike; the ratio is taken per round and the median reported."""
    sys.path.insert(0, str(ROOT / "tests"))  # the fake server: a test fixture
    from support.fake_server import FakeScript, FakeServer

    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("OPENAI_API_KEY", None)
    results = []
    with FakeServer.subprocess(FakeScript(latency_s=latency)) as srv:
        for r in range(rounds):
            if r % 2 == 0:
                base = _baseline(srv.url, n_cases, concurrency, env)
                pg = _promptgrid(srv.url, n_cases, concurrency, env)
            else:
                pg = _promptgrid(srv.url, n_cases, concurrency, env)
                base = _baseline(srv.url, n_cases, concurrency, env)
            results.append({"baseline": base, "promptgrid": pg,
                            "ratio": pg["calls_per_s"] / base["calls_per_s"]})
        n_requests = len(srv.requests())
    ratios = sorted(r["ratio"] for r in results)
    return {"rounds": results, "median_ratio": ratios[len(ratios) // 2], "server_requests": n_requests}


def memory(repeats: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        wall, _, _ = _run([PY, "-m", "promptgrid.matrix.cli", "run", "bfcl_v4", "--dataset", "mini",
                           "--model", "fake/auto", "--concurrency", "64", "--repeats", str(repeats),
                           "--run-dir", str(run_dir), "--no-progress"])
        s = _invocation(run_dir)
        size = (run_dir / "store.sqlite3").stat().st_size / 2**20
    return {"jobs": s["jobs"], "peak_rss_mb": s["peak_rss_mb"], "wall_s": wall, "jobs_per_s": s["jobs"] / wall,
            "cpu_ms_per_job": 1000 * s["cpu_s"] / s["jobs"], "store_mb": size}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=200, help="mini cases (x 26 variants = calls); 200 -> 5,200")
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--latency", type=float, default=0.1)
    p.add_argument("--rounds", type=int, default=3, help="baseline/promptgrid pairs (median ratio reported)")
    p.add_argument("--skip-throughput", action="store_true")
    p.add_argument("--skip-memory", action="store_true")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    from tabulate import tabulate

    report: dict = {}
    if not args.skip_throughput:
        t = throughput(args.cases, args.concurrency, args.latency, args.rounds)
        report["throughput"] = t
        rows = []
        for i, r in enumerate(t["rounds"], 1):
            for name, d in (("bare litellm gather", r["baseline"]), ("promptgrid run", r["promptgrid"])):
                rows.append([i, name, d["calls"], f"{d['calls_per_s']:.1f}", f"{d['cpu_ms_per_call']:.2f}",
                             f"{d['peak_rss_mb']:.0f}", f"{r['ratio']:.1%}" if name.startswith("prompt") else ""])
        print(f"Throughput: fake server {args.latency * 1000:.0f} ms latency, concurrency {args.concurrency}, "
              f"{args.rounds} rounds (order alternating)")
        print(tabulate(rows, headers=["round", "client", "calls", "calls/s", "CPU ms/call", "peak RSS MiB",
                                      "promptgrid/baseline"]))
        last = t["rounds"][-1]["promptgrid"]
        print(f"median promptgrid / baseline = {t['median_ratio']:.1%} (target >= 95%); promptgrid end to end "
              f"(imports, planning, final table included), last round: {last['wall_s']:.1f} s, "
              f"{last['end_to_end_calls_per_s']:.1f} calls/s\n")
    if not args.skip_memory:
        m = [memory(1), memory(10)]
        report["memory"] = m
        print("Memory: promptgrid run with the in-process fake/auto model (no HTTP, no litellm)")
        print(tabulate([[d["jobs"], f"{d['peak_rss_mb']:.0f}", f"{d['wall_s']:.1f}", f"{d['jobs_per_s']:.0f}",
                         f"{d['cpu_ms_per_job']:.2f}", f"{d['store_mb']:.0f}"] for d in m],
                       headers=["jobs", "peak RSS MiB", "wall s", "jobs/s", "CPU ms/job", "store MiB"]))
    if args.json:
        print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
