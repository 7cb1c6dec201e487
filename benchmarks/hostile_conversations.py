"""Two hostile answers in a conversation run: each costs its own episodes, never the run or a rerun.

    python benchmarks/hostile_conversations.py [--keep DIR]

A fake OpenAI-compatible server (``FakeServer.thread``, on 127.0.0.1) answers a
run of 3 conversations x 2 variants (python, prompt and constrained) made as a
user would make it, ``promptgrid run call_modes --dataset jsonl:FILE --model
openai/fake --api-base URL``, in a subprocess:

- conversation ``files_bomb`` (BFCL's ``multi_turn_base_0``): the model answers
  with 64 calls, then 60 (about 4 KB): ``mkdir``, ``cd``, ``touch``, ``cd``,
  then 30 rounds of ``mkdir l{k+1}``, ``cp l{k} l{k+1}``, ``mv l{k} m{k}``,
  ``cp m{k} l{k+1}``. GorillaFileSystem's ``cp`` copies a folder's contents
  shallowly, so the folders are shared and the worker stays small, but the state
  written out doubles with every round (2^30 nodes);
- conversation ``seedless``: ``MessageAPI`` with ``"random_seed": null``, and the
  answer ``[send_message(...), power(base=10, exponent=100000000)]``: the
  ``power`` call is stopped at the time bound, the worker is rebuilt by
  replaying ``send_message``, whose message id is drawn again from a seedless
  generator and differs;
- conversation ``healthy`` (BFCL's ``multi_turn_base_1``): the model answers
  with prose.

It prints the run's exit code, the episodes stored (with each failure's
detail), and then runs the same command again and prints how many requests the
rerun sent and its exit code. Expected: rc 0 both times, 6 episodes stored, the
4 episodes of the two hostile conversations ended as environment failures
naming the conversation, variant, model, turn and step, the 2 healthy ones
scored, and a rerun that sends nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("json->python,False", "json->python,False constrained")
SEEDLESS_TEXT = "Send 'see you at noon' to Bob, then tell me ten to the power of one hundred million."


def bomb_steps() -> list[str]:
    """The two answers of the file-system bomb, as Python call lists (64 and 60 calls)."""
    calls = ["mkdir(dir_name='l0')", "cd(folder='l0')", "touch(file_name='f')", "cd(folder='..')"]
    for k in range(30):
        calls += [f"mkdir(dir_name='l{k + 1}')", f"cp(source='l{k}', destination='l{k + 1}')",
                  f"mv(source='l{k}', destination='m{k}')", f"cp(source='m{k}', destination='l{k + 1}')"]
    return ["[" + ", ".join(calls[:64]) + "]", "[" + ", ".join(calls[64:]) + "]"]


def dataset(path: Path) -> str:
    """The three conversations as a ``jsonl:`` file."""
    sys.path.insert(0, str(ROOT.parent))
    from promptgrid.matrix.conversations import conversation_to_record, load_conversations

    base = load_conversations("bfcl:multi_turn_base", limit=2)
    bomb = {**conversation_to_record(base[0]), "id": "files_bomb"}
    healthy = {**conversation_to_record(base[1]), "id": "healthy"}
    seedless = {
        "id": "seedless",
        "question": [[{"role": "user", "content": SEEDLESS_TEXT}]],
        "involved_classes": ["MessageAPI", "MathAPI"],
        "initial_config": {"MessageAPI": {"random_seed": None, "current_user": "USR001"}},
        "ground_truth": [["send_message(receiver_id='USR002', message='see you at noon')",
                          "power(base=10, exponent=100)"]],
    }
    path.write_text("".join(json.dumps(r) + "\n" for r in (bomb, seedless, healthy)), encoding="utf-8")
    return f"jsonl:{path}"


def answer(request: dict[str, Any]) -> str:
    """The fake model: which conversation it is in (its first user message) and which step (answers so far)."""
    messages = request.get("messages") or []
    first_user = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
    step = sum(1 for m in messages if m.get("role") == "assistant")
    if first_user.startswith(SEEDLESS_TEXT):
        if step == 0:
            return "[send_message(receiver_id='USR002', message='see you at noon'), power(base=10, exponent=100000000)]"
        return "Done."
    if "final_report.pdf" in first_user and step < 2:  # multi_turn_base_0's first turn: the bomb
        return bomb_steps()[step]
    return "I cannot help with that."


def flood(steps: int) -> None:
    """A native model answering ``steps`` steps of one turn with 64 ``echo`` calls of 900 KB each (57.6 MB a
    step): prints the store's size and this process's peak memory."""
    import asyncio
    import resource

    from promptgrid.matrix.clients import Completion
    from promptgrid.matrix.conversations import load_conversations
    from promptgrid.matrix.running.config import ModelSpec, RunConfig
    from promptgrid.matrix.running.conversation_runner import arun_episodes
    from promptgrid.variants import Variant

    class Flood:
        takes_episode = True
        name = "flood"

        async def complete(self, messages: Any, params: Any, **_: Any) -> Completion:
            arguments = json.dumps({"content": "x" * 900_000})
            return Completion("", tool_calls=tuple(
                {"id": f"c{i}", "type": "function", "function": {"name": "echo", "arguments": arguments}}
                for i in range(64)))

        async def aclose(self) -> None:
            await asyncio.sleep(0)

    run_dir = Path(tempfile.mkdtemp(prefix="pg-flood-"))
    started = time.monotonic()
    config = RunConfig(grid="", dataset="", models=(ModelSpec("flood"),), run_dir=run_dir, max_steps=steps)
    summary = asyncio.run(arun_episodes(config, [Variant(call_mode="native")],
                                        load_conversations("bfcl:multi_turn_base", limit=1),
                                        clients={"flood": Flood()}))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    store_mb = sum(p.stat().st_size for p in run_dir.iterdir()) / 1e6
    print(f"flood: {summary.steps_sent} steps of 64 x 900 KB native calls in {time.monotonic() - started:.1f} s; "
          f"run directory {store_mb:.1f} MB, peak resident memory {peak_mb:.0f} MB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--keep", type=Path, help="use this run directory and keep it")
    parser.add_argument("--flood", type=int, metavar="STEPS",
                        help="instead: answer STEPS steps with 64 native echo calls of 900 KB each; print the "
                             "store's size and the peak memory")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT.parent))
    if args.flood:
        flood(args.flood)
        return 0
    sys.path.insert(0, str(ROOT / "tests"))  # the fake server: a test fixture
    from support.fake_server import FakeServer

    work = Path(tempfile.mkdtemp(prefix="pg-hostile-"))
    run_dir = args.keep or work / "run"
    spec = dataset(work / "conversations.jsonl")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENAI_API_KEY": "sk-fake"}
    with FakeServer.thread(answer_fn=answer) as server:
        command = [sys.executable, "-m", "promptgrid.matrix.cli", "run", "call_modes", "--dataset", spec,
                   "--constraints", "vllm",
                   "--model", "openai/fake", "--api-base", server.url, "--run-dir", str(run_dir),
                   "--concurrency", "2", *[a for v in VARIANTS for a in ("--variant", v)]]
        for attempt in ("run", "rerun"):
            before = len(server.requests())
            started = time.monotonic()
            done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=ROOT, timeout=900)
            sent = len(server.requests()) - before
            print(f"{attempt}: rc {done.returncode} in {time.monotonic() - started:.1f} s, {sent} requests sent")
            tail = (done.stdout + done.stderr).strip().splitlines()[-6:]
            print("  " + "\n  ".join(tail))
    from promptgrid.matrix.api import open_conversation_run

    episodes = open_conversation_run(run_dir).episodes()
    print(f"episodes stored: {len(episodes)}")
    for episode in episodes:
        verdict = "valid" if episode.valid else (episode.failure_mode or "error")
        print(f"  {episode.conversation_id} / {episode.variant_id[:60]}: {verdict}"
              + (f" - {episode.error}" if getattr(episode, "error", None) else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
