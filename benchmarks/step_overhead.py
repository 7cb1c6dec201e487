"""What promptgrid costs per model call: a single-turn call beside a conversation step, on one fake server.

    .venv/bin/python benchmarks/step_overhead.py                      # this checkout
    .venv/bin/python benchmarks/step_overhead.py --old "python /tmp/oldpg.py /tmp/old"   # and another one

Issue 32's done-when asks for the runner's throughput not to drop and for "a conversation step's client
overhead measured beside it". Both kinds of run go through ``promptgrid run`` (the CLI, in a subprocess, as a
user runs it) against the same fake OpenAI-compatible server (``FakeServer.subprocess``, its own process,
answering after ``--latency`` seconds), with the same client (litellm, ``openai/fake-model --api-base URL``):

- single-turn: ``run bfcl_v4 --dataset mini --limit N`` (26 variants x N cases, one call each);
- conversations: ``run call_modes --dataset bfcl:multi_turn_base --variant 'json->python,False' --limit M``; the
  server answers every step with prose, so each user turn is one step and ends the turn (no environment call:
  what is measured is the step's path through the client, the store and the episode loop, plus the scoring
  of the finished episode).

For each kind, two runs of different sizes (``--cases``/``--conversations`` and a quarter of them), each into a
fresh run directory: the requests the server saw, the wall time of the command, and the CPU time of the
command's process tree (``RUSAGE_CHILDREN``: environment workers included once reaped). The *marginal* cost
of a request is the difference of the two runs over the difference of their requests: start-up (imports,
loading, planning, the closing report) cancels out, and what is left is what one more call or step costs.
Each is measured ``--rounds`` times, alternating the order; medians are printed. ``--old PREFIX`` runs the
same commands under another checkout (a command prefix that runs its Python, ``-m promptgrid.matrix.cli``
appended) in the same rounds, for a before/after ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _command(prefix: list[str], args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Run ``prefix -m promptgrid.matrix.cli args``; (wall s, CPU s of its process tree)."""
    cpu, wall = _cpu_children(), time.perf_counter()
    proc = subprocess.run([*prefix, "-m", "promptgrid.matrix.cli", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT)
    wall, cpu = time.perf_counter() - wall, _cpu_children() - cpu
    if proc.returncode not in (0, 1):  # 1: prose answers fail every conversation: the run itself worked
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(args)}\n{proc.stderr[-3000:]}")
    return wall, cpu


def _kinds(url: str, cases: int, conversations: int, concurrency: int) -> dict[str, tuple[list[str], list[str]]]:
    common = ["--model", "openai/fake-model", "--api-base", url, "--concurrency", str(concurrency),
              "--timeout", "120", "--no-progress"]

    def single(n: int) -> list[str]:
        return ["run", "bfcl_v4", "--dataset", "mini", "--limit", str(n), *common]

    def conversation(n: int) -> list[str]:
        return ["run", "call_modes", "--dataset", "bfcl:multi_turn_base", "--limit", str(n), "--variant",
                "json->python,False", *common]

    return {"single-turn call": (single(max(1, cases // 4)), single(cases)),
            "conversation step": (conversation(max(1, conversations // 4)), conversation(conversations))}


def _once(prefix: list[str], args: list[str], server: object, env: dict[str, str]) -> tuple[int, float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        before = len(server.requests())  # type: ignore[attr-defined]
        wall, cpu = _command(prefix, [*args, "--run-dir", str(Path(tmp) / "run")], env)
        return len(server.requests()) - before, wall, cpu  # type: ignore[attr-defined]


def measure(prefix: list[str], sizes: tuple[list[str], list[str]], server: object,
            env: dict[str, str]) -> dict[str, float]:
    """The small and the large run, and the marginal CPU and wall time of a request between them."""
    n1, wall1, cpu1 = _once(prefix, sizes[0], server, env)
    n2, wall2, cpu2 = _once(prefix, sizes[1], server, env)
    extra = max(1, n2 - n1)
    return {"requests": n2, "wall_s": wall2, "cpu_s": cpu2, "small_requests": n1, "small_cpu_s": cpu1,
            "marginal_cpu_ms": 1000 * (cpu2 - cpu1) / extra, "marginal_wall_ms": 1000 * (wall2 - wall1) / extra}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", type=int, default=40, help="mini cases for the single-turn run (x 26 variants)")
    p.add_argument("--conversations", type=int, default=100, help="bfcl:multi_turn_base conversations")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--latency", type=float, default=0.02, help="the server's seconds before each answer")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--old", help="command prefix that runs another checkout's Python with its promptgrid")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "tests"))  # the fake server: a test fixture
    from support.fake_server import FakeScript, FakeServer

    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY" and not k.startswith("PROMPTGRID_")}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    if os.environ.get("PROMPTGRID_BFCL_DATA"):
        env["PROMPTGRID_BFCL_DATA"] = os.environ["PROMPTGRID_BFCL_DATA"]
    sides = {"new": [sys.executable]}
    if args.old:
        sides["old"] = shlex.split(args.old)
    results: dict[str, dict[str, list[dict[str, float]]]] = {}
    with FakeServer.subprocess(FakeScript(latency_s=args.latency, answer="prose")) as srv:
        kinds = _kinds(srv.url, args.cases, args.conversations, args.concurrency)
        for r in range(args.rounds):
            order = list(sides.items()) if r % 2 == 0 else list(reversed(sides.items()))
            for side, prefix in order:
                for kind, sizes in (kinds.items() if r % 2 == 0 else reversed(kinds.items())):
                    results.setdefault(side, {}).setdefault(kind, []).append(measure(prefix, sizes, srv, env))
    summary = {side: {kind: {key: statistics.median(m[key] for m in runs) for key in runs[0]}
                      for kind, runs in by_kind.items()} for side, by_kind in results.items()}
    if args.json:
        print(json.dumps({"summary": summary, "rounds": results}, indent=2))
        return 0
    print(f"fake server: {args.latency * 1000:.0f} ms a request, concurrency {args.concurrency}; medians of "
          f"{args.rounds} round(s); marginal = (large run - small run) / (their difference in requests)")
    print(f"{'side':5} {'kind':18} {'requests':>8} {'wall s':>7} {'CPU s':>6} {'marginal CPU ms/req':>19} "
          f"{'marginal wall ms/req':>20}")
    for side, by_kind in summary.items():
        for kind, m in by_kind.items():
            print(f"{side:5} {kind:18} {m['requests']:>8.0f} {m['wall_s']:>7.2f} {m['cpu_s']:>6.2f} "
                  f"{m['marginal_cpu_ms']:>19.2f} {m['marginal_wall_ms']:>20.2f}")
    if "old" in summary:
        for kind in summary["new"]:
            new, old = summary["new"][kind], summary["old"][kind]
            print(f"{kind}: marginal CPU per request new/old {new['marginal_cpu_ms'] / old['marginal_cpu_ms']:.2f}x; "
                  f"marginal wall per request new/old {new['marginal_wall_ms'] / old['marginal_wall_ms']:.2f}x")
    step, call = summary["new"]["conversation step"], summary["new"]["single-turn call"]
    print(f"a conversation step costs {step['marginal_cpu_ms'] / call['marginal_cpu_ms']:.2f}x the marginal CPU of a "
          "single-turn call")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
