"""Issue 32's red-team cases for conversation runs, re-run as a user runs them: one line each of what happens.

    .venv/bin/python benchmarks/red_team_conversations.py [--keep DIR]

Each case runs ``promptgrid run call_modes --dataset mini-mt:en --limit 3
--variant json->python,False --model openai/fake --api-base URL`` (3
episodes a model) in a subprocess, against the fake OpenAI-compatible server
of the tests (``tests/support/fake_server.py``, on 127.0.0.1), with a made-up
key in ``OPENAI_API_KEY``:

1. two runs into one run directory at once (the second starts 4 s after the
   first, whose answers take 0.2 s each): the second should stop at once, and
   no request be sent twice;
2. a server that echoes the key in every answer: the key should be in no file
   of the run directory, nor in ``promptgrid export``'s output;
3. a single-turn run into a conversation run directory, and the reverse: both
   should be refused;
4. a server that answers 401 to everything, two models: one request per model;
5. a server that answers 429 with a Retry-After of 100000 s, ``--retry-after-cap
   2``: the model should stop after one capped wait (two requests).

Before issue 32 (main 22aa6f2), its Why: the second run exited 0 and paid 159
of 220 calls twice; the key was stored (16 hits) and exported (8); mixing
exited 0; a 401 cost one request per episode; the Retry-After waited the cap
per retry per episode.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROMPTGRID = [sys.executable, "-m", "promptgrid.matrix.cli"]
KEY = "sk-redteam-SECRET-7f3a9c"
VARIANT = "json->python,False"


def command(url: str, run_dir: Path, *extra: str, models: tuple[str, ...] = ("openai/fake",)) -> list[str]:
    """``promptgrid run`` of the cases' conversation study into ``run_dir``, against ``url``."""
    args = [*PROMPTGRID, "run", "call_modes", "--dataset", "mini-mt:en", "--limit", "3", "--variant", VARIANT,
            "--run-dir", str(run_dir), "--api-base", url, "--no-progress"]
    for model in models:
        args += ["--model", model]
    return [*args, *extra]


def single_turn(url: str, run_dir: Path) -> list[str]:
    return [*PROMPTGRID, "run", "demo", "--dataset", "mini:en", "--limit", "2", "--model", "openai/fake",
            "--api-base", url, "--run-dir", str(run_dir), "--no-progress"]


def start(args: list[str]) -> subprocess.Popen[str]:
    env = {**os.environ, "OPENAI_API_KEY": KEY, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(args: list[str]) -> tuple[int, str]:
    process = start(args)
    out = process.communicate()[0]
    return process.returncode, out


def last_line(out: str, width: int = 160) -> str:
    lines = [line.strip() for line in out.strip().splitlines() if line.strip()]
    return (lines[-1] if lines else "")[:width]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="make the run directories under this folder and keep them")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))  # the fake server: a test fixture
    from support.fake_server import FakeScript, FakeServer

    root = Path(tempfile.mkdtemp(prefix="pg-redteam-")) if args.keep is None else args.keep
    root.mkdir(parents=True, exist_ok=True)
    try:
        with FakeServer.thread(FakeScript(latency_s=0.2)) as server:
            first = start(command(server.url, root / "twice"))
            time.sleep(4)
            rc2, out2 = finish(command(server.url, root / "twice"))
            first.communicate()
            sent = server.requests()
            twice = len(sent) - len({(r["hash"], r.get("n")) for r in sent})
            print(f"1. two runs at once: first rc {first.returncode}; second rc {rc2} ({last_line(out2, 110)}...); "
                  f"{len(sent)} requests, {twice} sent twice")
        with FakeServer.thread(FakeScript(echo_auth_in_answer=True)) as server:
            rc, _ = finish(command(server.url, root / "echo"))
            exported = root / "echo.jsonl"
            rc_export, _ = finish([*PROMPTGRID, "export", str(root / "echo"), "--jsonl", "-o", str(exported)])
            files = [p for p in [*(root / "echo").rglob("*"), exported] if p.is_file()]
            holding = [str(p.relative_to(root)) for p in files if KEY.encode() in p.read_bytes()]
            redacted = sum(p.read_bytes().count(b"[REDACTED]") for p in files)  # the answers were kept, redacted
            print(f"2. a key echoed in every answer: run rc {rc}, export rc {rc_export}; {len(holding)} of "
                  f"{len(files)} files hold it {holding or ''}; [REDACTED] {redacted} times in them")
        with FakeServer.thread(FakeScript()) as server:
            finish(command(server.url, root / "conversation"))
            rc, out = finish(single_turn(server.url, root / "conversation"))
            print(f"3a. a single-turn run into a conversation run directory: rc {rc} ({last_line(out, 100)}...)")
            finish(single_turn(server.url, root / "single"))
            rc, out = finish(command(server.url, root / "single"))
            print(f"3b. a conversation run into a single-turn run directory: rc {rc} ({last_line(out, 100)}...)")
        with FakeServer.thread(FakeScript(status=401)) as server:
            rc, out = finish(command(server.url, root / "401", models=("openai/fake-a", "openai/fake-b")))
            print(f"4. 401 to everything, 2 models x 3 episodes: rc {rc}; {len(server.requests())} requests")
        with FakeServer.thread(FakeScript(p_rate_limit=1.0, retry_after_s=100000)) as server:
            began = time.monotonic()
            rc, out = finish(command(server.url, root / "retry_after", "--retry-after-cap", "2"))
            print(f"5. Retry-After 100000 s, --retry-after-cap 2, 3 episodes: rc {rc} after "
                  f"{time.monotonic() - began:.1f} s (start-up included); {len(server.requests())} requests")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
