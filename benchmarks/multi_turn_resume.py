"""A conversation run killed mid-episode and resumed, against a real HTTP server: nothing sent twice.

    python benchmarks/multi_turn_resume.py [--limit 6] [--kill-after 15]

A fake OpenAI-compatible server (``FakeServer.subprocess``, its own process,
logging every request) answers each user turn with a call, then a sentence
after the call's results (``conversation_answer``): two steps per turn. The
script runs ``promptgrid run call_modes --dataset bfcl:multi_turn_base
--model openai/fake --api-base URL`` (prompt-mode variants: python and json
return formats) as a user would, in a subprocess:

1. uninterrupted, into a fresh directory: the server's request count is the
   whole run's steps;
2. into another directory, killed with SIGKILL as soon as the server has
   answered ``--kill-after`` requests, then the same command again to the end.

A request the server answered just before the kill, but whose answer the
client had not yet committed, is sent again on resume (it was never stored);
stored answers are never sent again: the resumed run's requests equal the
uninterrupted run's minus the answers stored.

It prints the requests of each run, how many requests of the resumed run
repeated one the killed run had already been answered (by the sha256 of the
messages, per (variant, episode) order), and whether every episode's verdict
(valid, failure mode, per-turn verdicts) equals the uninterrupted run's.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the fake server: a test fixture

from support.fake_server import FakeScript, FakeServer  # noqa: E402

VARIANTS = ("ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=classic",
            "ret_fmt=json&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=classic")


def command(url: str, run_dir: Path, limit: int) -> list[str]:
    cmd = [sys.executable, "-m", "promptgrid.matrix.cli", "run", "call_modes", "--dataset", "bfcl:multi_turn_base",
           "--limit", str(limit), "--model", "openai/fake", "--api-base", url, "--run-dir", str(run_dir),
           "--concurrency", "2", "--no-progress"]
    for v in VARIANTS:
        cmd += ["--variant", v]
    return cmd


def verdicts(run_dir: Path) -> dict[tuple[str, str, int], tuple[object, ...]]:
    out = subprocess.run([sys.executable, "-m", "promptgrid.matrix.cli", "export", str(run_dir)], check=True,
                         capture_output=True, text=True).stdout
    rows = [json.loads(line) for line in out.splitlines()]
    return {(r["variant_id"], r["conversation_id"], r["repeat"]):
            (r["valid"], r["failure_mode"], tuple((t["valid"], t["failure_mode"]) for t in r["turns"]))
            for r in rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=6)
    ap.add_argument("--kill-after", type=int, default=15)
    args = ap.parse_args()
    env = {**os.environ, "OPENAI_API_KEY": "sk-fake", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    script = FakeScript(answer="support.fake_server:conversation_answer")
    with tempfile.TemporaryDirectory(prefix="pg-mt-resume-") as tmp:
        with FakeServer.subprocess(script) as server:
            url = server.url
            started = time.perf_counter()
            subprocess.run(command(url, Path(tmp, "whole"), args.limit), env=env, check=True, capture_output=True)
            whole = len(server.requests())
            whole_s = time.perf_counter() - started
        with FakeServer.subprocess(script) as server:
            url = server.url
            proc = subprocess.Popen(command(url, Path(tmp, "killed"), args.limit), env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            while len(server.requests()) < args.kill_after and proc.poll() is None:
                time.sleep(0.01)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            before = [r["hash"] for r in server.requests()]
            import sqlite3

            with sqlite3.connect(Path(tmp, "killed", "conversations.sqlite3")) as db:
                stored = db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
            resumed = subprocess.run(command(url, Path(tmp, "killed"), args.limit), env=env, capture_output=True,
                                     text=True)
            after = [r["hash"] for r in server.requests()][len(before):]
        again = Counter(after) & Counter(before)
        same = verdicts(Path(tmp, "whole")) == verdicts(Path(tmp, "killed"))
        print(f"uninterrupted run: {whole} requests ({whole_s:.1f} s)")
        print(f"killed run: {len(before)} requests answered before SIGKILL (exit {proc.returncode}), {stored} "
              "answers stored")
        print(f"resumed run: {len(after)} requests (exit {resumed.returncode}); killed + resumed = "
              f"{len(before) + len(after)}")
        print(f"requests of the resumed run whose messages the killed run had already sent: {sum(again.values())} "
              "(answered by the server but killed before they were stored)")
        print(f"stored answers sent again: {len(before) + len(after) - whole - (len(before) - stored)} "
              f"(resumed = uninterrupted - stored: {len(after)} = {whole} - {stored})")
        print(f"verdicts equal to the uninterrupted run's: {same} ({len(verdicts(Path(tmp, 'whole')))} episodes)")


if __name__ == "__main__":
    main()
