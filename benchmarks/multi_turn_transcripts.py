"""Whole transcripts: what promptgrid sends at every step of a conversation against what bfcl-eval's prompting
handler sends, byte for byte, for the scripted ground-truth model.

    .venv/bin/python benchmarks/multi_turn_transcripts.py [--categories base,miss_func,...] [--limit N]

For each category (``multi_turn_base``, ``_miss_func``, ``_miss_param``,
``_long_context``; 200 entries each) promptgrid's runner takes every entry
through its turns with ``fake/ground-truth`` in the prompt variant of
bfcl-eval's default prompt (``Variant()``: python return format, JSON docs,
no tag, plaintext, classic), recording the message list of every request.
Then bfcl-eval's own ``inference_multi_turn_prompting`` (its OpenAI
completions prompting handler, built offline with a dummy key) runs the same
entry, from ``load_dataset_entry``, with its query method replaced by one
that records the message list it would send and answers with the answer
promptgrid's fake gave at that step. Its executor, result formatter and
turn handling are bfcl-eval's; its executor ``eval``s the answers, which are
the dataset's own ground truth written by the fake, never a model's output.

An entry agrees when both send the same number of requests and every
request's messages are equal once written as JSON (``ensure_ascii=False``,
keys in order): the bytes a client serializes. It prints, per category, the
entries that agree out of those compared, and for the first few that do not,
the first request and message that differ.

Needs bfcl-eval installed (and ``openai``, for the handler's client object).
No network.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import os
import sys
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from promptgrid.matrix.conversations import ScriptedClient, load_conversations  # noqa: E402
from promptgrid.variants import Variant  # noqa: E402
from support.bfcl import bfcl_environment, prompting_handler_class  # noqa: E402
from support.episodes import run_conversations  # noqa: E402

CATEGORIES = ("base", "miss_func", "miss_param", "long_context")
GT = "fake/ground-truth"


@dataclass
class Agreement:
    category: str
    compared: int
    identical: int
    differences: list[str]


class _Recorder:
    """A ``fake/ground-truth`` client that keeps, per conversation, every request's messages and its answer."""

    takes_episode = True

    def __init__(self) -> None:
        self.inner = ScriptedClient(GT)
        self.name = GT
        self.sent: dict[str, list[tuple[list[dict[str, Any]], str]]] = {}

    async def complete(self, messages: Any, params: Mapping[str, Any], **kwargs: Any) -> Any:
        completion = await self.inner.complete(messages, params, **kwargs)
        episode = kwargs["episode"]
        self.sent.setdefault(episode.conversation.id, []).append(
            (copy.deepcopy(list(messages)), completion.text or ""))
        return completion

    async def aclose(self) -> None:
        return None


def bfcl_requests(handler_class: Any, entry: Mapping[str, Any],
                  answers: Sequence[str]) -> list[list[dict[str, Any]]]:
    """The message list of every request bfcl-eval's prompting handler makes for ``entry`` when its model answers
    ``answers`` in order (an empty answer once they run out)."""
    handler = handler_class(f"promptgrid_transcripts_{uuid.uuid4().hex}", 0.001, "promptgrid-transcripts", False)
    sent: list[list[dict[str, Any]]] = []
    pending = iter(answers)

    def query(inference_data: dict[str, Any]) -> tuple[str, float]:
        sent.append(copy.deepcopy(inference_data["message"]))
        return next(pending, ""), 0.0

    def parse(text: str) -> dict[str, Any]:
        return {"model_responses": text, "model_responses_message_for_chat_history":
                {"role": "assistant", "content": text}, "input_token": 0, "output_token": 0}

    handler._query_prompting = query
    handler._parse_query_response_prompting = parse
    with contextlib.redirect_stdout(io.StringIO()):  # it prints every step
        handler.inference_multi_turn_prompting(copy.deepcopy(dict(entry)), False, True)
    return sent


def _first_difference(ours: Sequence[Sequence[Mapping[str, Any]]],
                      theirs: Sequence[Sequence[Mapping[str, Any]]]) -> str:
    for step, (a, b) in enumerate(zip(ours, theirs, strict=False)):
        if _bytes(a) != _bytes(b):
            for index, (m, n) in enumerate(zip(a, b, strict=False)):
                if _bytes([m]) != _bytes([n]):
                    return (f"request {step}, message {index} ({m.get('role')}): ours "
                            f"{json.dumps(m, ensure_ascii=False)[:160]} | bfcl-eval "
                            f"{json.dumps(n, ensure_ascii=False)[:160]}")
            return f"request {step}: {len(a)} messages, bfcl-eval {len(b)}"
    return f"{len(ours)} requests, bfcl-eval {len(theirs)}"


def _bytes(messages: Sequence[Mapping[str, Any]]) -> str:
    return json.dumps(list(messages), ensure_ascii=False)


def compare(category: str, *, limit: int | None = None, handler_class: Any = None,
            run_dir: str | os.PathLike[str] | None = None) -> Agreement:
    """Run ``bfcl:multi_turn_<category>`` (the first ``limit`` entries) through both and compare each entry's
    requests (call inside ``bfcl_environment``)."""
    from bfcl_eval.utils import load_dataset_entry

    handler_class = handler_class or prompting_handler_class()
    conversations = load_conversations(f"bfcl:multi_turn_{category}", limit=limit)
    entries = {entry["id"]: entry for entry in load_dataset_entry(f"multi_turn_{category}")}
    recorder = _Recorder()
    with tempfile.TemporaryDirectory(prefix="promptgrid-transcripts-") as tmp:
        summary = run_conversations([Variant()], conversations, models=[GT], run_dir=run_dir or tmp,
                                    clients={GT: recorder}, concurrency=4)
    assert summary.errors == 0, summary
    identical, differences = 0, []
    for conversation in conversations:
        ours = recorder.sent[conversation.id]
        theirs = bfcl_requests(handler_class, entries[conversation.id], [answer for _, answer in ours])
        if [_bytes(m) for m, _ in ours] == [_bytes(m) for m in theirs]:
            identical += 1
        else:
            differences.append(f"{conversation.id}: {_first_difference([m for m, _ in ours], theirs)}")
    return Agreement(category, len(conversations), identical, differences)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--categories", default=",".join(CATEGORIES))
    ap.add_argument("--limit", type=int, default=None, help="entries per category (default: all 200)")
    ap.add_argument("--show", type=int, default=5, help="differences shown per category")
    args = ap.parse_args(argv)
    with bfcl_environment():
        handler_class = prompting_handler_class()
        results = [compare(c.strip(), limit=args.limit, handler_class=handler_class)
                   for c in args.categories.split(",") if c.strip()]
    for result in results:
        print(f"multi_turn_{result.category}: {result.identical}/{result.compared} transcripts byte-identical")
        for line in result.differences[:args.show]:
            print(f"  {line}")
    return 0 if all(r.identical == r.compared for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
