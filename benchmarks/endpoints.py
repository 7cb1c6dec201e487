"""Several endpoints per model: calls/s with one fake replica and with two, and a replica going down mid-run.

    .venv/bin/python benchmarks/endpoints.py            # 26 variants x 20 mini cases = 520 calls per run
    .venv/bin/python benchmarks/endpoints.py --quick    # 26 x 6 = 156 calls per run

Each fake server (``FakeServer.subprocess``: its own process) is one vLLM
replica: it answers after ``--latency`` seconds and at most
``--max-concurrency`` requests at once (``FakeScript.max_concurrency``; the
rest queue), so one replica tops out at ``max_concurrency / latency``
calls/s whatever the client sends. ``promptgrid run`` (the CLI, in a
subprocess) sends the same jobs

1. to one endpoint, ``--concurrency C`` (C = max_concurrency);
2. to two endpoints (``--api-base`` twice), the same ``--concurrency C``,
   which is per endpoint: 2 x C calls in flight, spread by litellm's Router;
3. to two endpoints of which one goes down after answering a quarter of the
   jobs (``FakeScript.down_after``: it stops listening and drops the calls in
   flight): every job must still be answered (failover to the other).

calls/s is the run's own figure (``run.json``: calls over the sending phase).
The ratio 2/1 should be >= 1.8 (issue 14). Who answered comes from the
store's ``endpoint`` column and the servers' logs.

The default latency (0.5 s, short for an LLM answer) keeps the client from
being the bottleneck: a routed call costs ~15 ms of promptgrid CPU (~10 ms
direct), so at 0.2 s and 40 calls/s a loaded 2-core machine measures its own
CPU, not the replicas (1.7x there).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def _run(urls: list[str], cases: int, concurrency: int, run_dir: Path) -> dict[str, Any]:
    """``promptgrid run`` against ``urls``; its summary, wall time and calls per endpoint and status."""
    cmd = [PY, "-m", "promptgrid.matrix.cli", "run", "bfcl_v4", "--dataset", "mini", "--limit", str(cases),
           "--model", "openai/fake-model", "--concurrency", str(concurrency), "--timeout", "60",
           "--run-dir", str(run_dir), "--no-progress"]
    for url in urls:
        cmd += ["--api-base", url]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("OPENAI_API_KEY", None)
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"promptgrid run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    summary = json.loads((run_dir / "run.json").read_text())["invocations"][-1]["summary"]
    db = sqlite3.connect(f"file:{run_dir / 'store.sqlite3'}?mode=ro", uri=True)
    try:
        by = db.execute("SELECT endpoint, status, COUNT(*), MAX(attempts) FROM calls GROUP BY endpoint, status")
        rows = [(e, s, n, a) for e, s, n, a in by]
    finally:
        db.close()
    return {"summary": summary, "wall_s": wall, "calls": rows}


def measure(cases: int, latency: float, max_concurrency: int) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT / "tests"))  # the fake server: a test fixture
    from support.fake_server import FakeScript, FakeServer

    replica = FakeScript(latency_s=latency, max_concurrency=max_concurrency)
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        a = stack.enter_context(FakeServer.subprocess(replica, log_path=Path(tmp) / "a.jsonl"))
        b = stack.enter_context(FakeServer.subprocess(replica, log_path=Path(tmp) / "b.jsonl"))
        out["one"] = _run([a.url], cases, max_concurrency, Path(tmp) / "one")
        out["two"] = _run([a.url, b.url], cases, max_concurrency, Path(tmp) / "two")
        jobs = out["one"]["summary"]["sent"]
        dying = FakeScript(latency_s=latency, max_concurrency=max_concurrency, down_after=max(1, jobs // 4))
        c = stack.enter_context(FakeServer.subprocess(dying, log_path=Path(tmp) / "c.jsonl"))
        d = stack.enter_context(FakeServer.subprocess(replica, log_path=Path(tmp) / "d.jsonl"))
        out["down"] = _run([c.url, d.url], cases, max_concurrency, Path(tmp) / "down")
        out["down"]["server_answers"] = {"dying": sum(r.get("outcome") == "ok" for r in c.requests()),
                                         "healthy": sum(r.get("outcome") == "ok" for r in d.requests())}
        out["down"]["down_after"] = dying.down_after
        out["urls"] = {"a": a.url, "b": b.url, "dying": c.url, "healthy": d.url}
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=20, help="mini cases (x 26 variants = calls per run)")
    p.add_argument("--quick", action="store_true", help="6 cases (156 calls per run)")
    p.add_argument("--latency", type=float, default=0.5, help="seconds per answer at a replica")
    p.add_argument("--max-concurrency", type=int, default=4,
                   help="requests a replica answers at once; also promptgrid's --concurrency (per endpoint)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    cases = 6 if args.quick else args.cases
    from tabulate import tabulate

    r = measure(cases, args.latency, args.max_concurrency)
    ceiling = args.max_concurrency / args.latency
    rows = []
    for name, key, n in (("one endpoint", "one", 1), ("two endpoints", "two", 2),
                         ("two, one down mid-run", "down", 2)):
        s = r[key]["summary"]
        done = sum(n_ for _e, st, n_, _a in r[key]["calls"] if st == "done")
        rows.append([name, s["sent"], done, s["errors"], f"{s['calls_per_s']:.1f}", f"{ceiling * n:.0f}",
                     f"{r[key]['wall_s']:.1f}"])
    print(f"Fake replicas: {args.latency * 1000:.0f} ms per answer, at most {args.max_concurrency} at once "
          f"(one replica tops out at {ceiling:.0f} calls/s); promptgrid --concurrency {args.max_concurrency} per "
          f"endpoint; {cases} mini cases x 26 variants")
    print(tabulate(rows, headers=["run", "calls", "answered", "errors", "calls/s", "ceiling calls/s", "wall s"]))
    ratio = r["two"]["summary"]["calls_per_s"] / r["one"]["summary"]["calls_per_s"]
    print(f"\ntwo endpoints / one = {ratio:.2f}x (target >= 1.8x)")
    urls = {v: k for k, v in r["urls"].items()}
    spread = {urls.get(e, e): n for e, st, n, _a in r["two"]["calls"] if st == "done"}
    print(f"two endpoints, answers per endpoint (store): {spread}")
    down = r["down"]
    by = {urls.get(e, e): n for e, st, n, _a in down["calls"] if st == "done"}
    retried = max((a for _e, _s, _n, a in down["calls"]), default=1)
    print(f"one down after {down['down_after']} answers: answered per endpoint (store) {by}; servers' logs "
          f"{down['server_answers']}; jobs left unanswered: {down['summary']['sent'] - sum(by.values())}; "
          f"most attempts of a call: {retried}")
    if args.json:
        print(json.dumps(r, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
