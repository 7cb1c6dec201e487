"""Batch mode against the fake server's files + batches API: same results as online, and kill-at-every-stage.

    .venv/bin/python benchmarks/batch.py               # bfcl_v4 x mini: 10,764 jobs
    .venv/bin/python benchmarks/batch.py --limit 40    # 26 x 40 = 1,040 jobs, quicker

1. Equality. The same ``promptgrid run`` command (the CLI, in a subprocess)
   goes once online and once with ``--batch`` against the fake server (its own
   process), into two run directories; every stored row (status, response,
   verdict) must be equal. Wall time of both whole commands is printed.
2. Kill at each stage. For each stage -- while uploading (files.create),
   after creating the batch (batches.create: the server made it, the client
   never heard), while polling (batches.retrieve), while collecting (the
   error file's download, after the output file's lines are stored; 5% of the
   lines fail there, so that an error file exists) -- a fresh fake server
   blocks that request, the run is SIGKILLed once the server's log shows it
   inside that step, and the same command is run again to the end. From the
   server's log: how many job keys were uploaded more than once, put in more
   than one created batch, and how many jobs have no result (all three must
   be 0), and whether the answered rows equal the online run's (the failed
   lines of the collecting stage are stored as server errors).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the fake server: a test fixture

from support.fake_server import FakeScript, FakeServer  # noqa: E402

STAGES = {  # stage -> (endpoint blocked, which occurrence, share of lines that fail)
    "uploading": ("files.create", 1, 0.0),
    "after creating": ("batches.create", 1, 0.0),
    "polling": ("batches.retrieve", 2, 0.0),
    # The output file is downloaded and stored, the error file's download hangs: killed mid-collection.
    "collecting": ("files.content", 2, 0.05),
}


def _cmd(url: str, run_dir: Path, limit: int | None, batch: bool) -> list[str]:
    cmd = [sys.executable, "-m", "promptgrid.matrix.cli", "run", "bfcl_v4", "--dataset", "mini",
           "--model", "openai/fake-model", "--api-base", url, "--run-dir", str(run_dir), "--no-progress"]
    if limit:
        cmd += ["--limit", str(limit)]
    if batch:
        cmd += ["--batch", "--poll", "0.2"]
    return cmd


def _env() -> dict[str, str]:
    return {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENAI_API_KEY": "sk-fake"}


def _run(cmd: list[str]) -> float:
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=ROOT)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    return time.perf_counter() - t


def _rows(run_dir: Path) -> list[tuple]:
    from promptgrid.matrix.running.store import RunStore

    with RunStore(run_dir, readonly=True) as store:
        return sorted((r.variant_id, r.case_id, r.repeat, r.status, r.response, r.valid, r.error_kind)
                      for r in store.rows(include_pending=True))


def _counts(server: FakeServer) -> tuple[Counter[str], Counter[str]]:
    uploaded: Counter[str] = Counter()
    batched: Counter[str] = Counter()
    for entry in server.batch_log():
        if entry.get("endpoint") == "files.create":
            uploaded.update(entry.get("custom_ids") or ())
        elif entry.get("endpoint") == "batches.create" and entry.get("status", 200) == 200:
            batched.update(entry.get("custom_ids") or ())
    return uploaded, batched


def _kill_when(proc: subprocess.Popen[str], server: FakeServer, endpoint: str, nth: int, limit_s: float) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        seen = sum(1 for e in server.batch_log() if e.get("endpoint") == endpoint)
        if seen >= nth:
            time.sleep(0.3)  # let the blocked request settle inside the server
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    return False


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--limit", type=int, default=None, help="first N mini cases (default: all 414: 10,764 jobs)")
    p.add_argument("--skip-kills", action="store_true")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="pg-batch-bench-"))
    with FakeServer.subprocess(FakeScript(batch_polls=2)) as server:
        online_s = _run(_cmd(server.url, work / "online", args.limit, batch=False))
        batch_s = _run(_cmd(server.url, work / "batch", args.limit, batch=True))
        uploaded, batched = _counts(server)
    online, batched_rows = _rows(work / "online"), _rows(work / "batch")
    pending = sum(1 for r in batched_rows if r[3] == "pending")
    print(f"jobs: {len(online)}; distinct calls uploaded: {len(uploaded)}")
    print(f"online run (whole command): {online_s:.1f} s; --batch run (whole command, 2 polls): {batch_s:.1f} s")
    print(f"batch rows equal online rows: {batched_rows == online}; pending after batch: {pending}; "
          f"uploaded twice: {sum(1 for n in uploaded.values() if n > 1)}; "
          f"batched twice: {sum(1 for n in batched.values() if n > 1)}")
    ok = batched_rows == online and pending == 0
    if args.skip_kills:
        return 0 if ok else 1
    print("\nkilled at each stage, then the same command again:")
    print(f"{'stage':<16} {'killed':>6} {'uploaded 2x':>11} {'batched 2x':>10} {'lost':>5} {'failed lines':>12} "
          f"{'answers = online':>16}")
    online_by_job = {r[:3]: r for r in online}
    for stage, (endpoint, nth, p_error) in STAGES.items():
        run_dir = work / f"kill-{stage.replace(' ', '-')}"
        script = FakeScript(batch_polls=2, block=endpoint, block_nth=nth, p_batch_line_error=p_error)
        with FakeServer.subprocess(script) as server:
            cmd = _cmd(server.url, run_dir, args.limit, batch=True)
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env(),
                                    cwd=ROOT)
            killed = _kill_when(proc, server, endpoint, nth, limit_s=600)
            _run(cmd)
            uploaded, batched = _counts(server)
        rows = _rows(run_dir)
        lost = sum(1 for r in rows if r[3] == "pending")
        twice_up = sum(1 for n in uploaded.values() if n > 1)
        twice_b = sum(1 for n in batched.values() if n > 1)
        answered = [r for r in rows if r[3] == "done"]
        failed = [r for r in rows if r[3] == "error"]
        same = (len(rows) == len(online) and all(online_by_job[r[:3]] == r for r in answered)
                and all(r[6] == "server" for r in failed) and (bool(failed) == (p_error > 0)))
        ok = ok and killed and not (twice_up or twice_b or lost) and same
        print(f"{stage:<16} {str(killed):>6} {twice_up:>11} {twice_b:>10} {lost:>5} {len(failed):>12} "
              f"{str(same):>16}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
