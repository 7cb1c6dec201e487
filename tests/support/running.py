"""Builders shared by the runner tests: a run config, a prepared run, a stand-in scorer, the fake server.

The cases are ``support.builders.numbered_case``: "Please call func_<i> with
x=<i>.", which ``answer_right`` answers correctly.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections import Counter
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from promptgrid.matrix.running.config import ModelSpec, RunConfig, model_params
from promptgrid.matrix.running.session import Prepared
from promptgrid.records import Case
from promptgrid.variants import Variant
from support.fake_server import FakeScript, FakeServer

TESTS_DIR = Path(__file__).resolve().parents[1]


class StandInVerdict:
    def __init__(self, valid: bool) -> None:
        self.valid = valid

    def to_dict(self) -> dict[str, Any]:
        return {"valid": self.valid, "error_code": "VALID" if self.valid else "DECODER_FAILED",
                "bfcl_error_type": None if self.valid else "ast_decoder:decoder_failed",
                "failure_mode": None, "format_agnostic_valid": self.valid}


def stand_in_score(response: str, variant: Variant, case: Case) -> StandInVerdict:
    """Valid when the response names the case's function (enough to test the plumbing)."""
    return StandInVerdict(case.functions[0]["name"] in response)


def config(run_dir: Path, *, models: list[ModelSpec] | None = None, api_base: str | None = None,
           model: str = "openai/fake-model", concurrency: int = 8, timeout: float = 30.0, repeats: int = 1,
           max_retries: int = 5, max_cost: float | None = None, params: dict[str, Any] | None = None,
           backoff: float = 0.01) -> RunConfig:
    if models is None:
        models = [ModelSpec(name=model, params=model_params(params, repeats), api_base=api_base,
                            concurrency=concurrency, timeout=timeout)]
    return RunConfig(grid="bfcl_v4", dataset="standin", models=tuple(models), run_dir=run_dir, repeats=repeats,
                     max_retries=max_retries, max_cost=max_cost, backoff_base_s=backoff, backoff_max_s=backoff * 8)


def prepared(cfg: RunConfig, variants: list[Variant], cases: list[Case]) -> Prepared:
    from promptgrid.templates import Renderer

    return Prepared(cfg, "bfcl_v4", variants, cases, Renderer())


def answer_right(request: dict[str, Any]) -> str:
    """Fake-server answer function: call the function the user asks for, in Python syntax."""
    user = request["messages"][-1]["content"]
    m = re.search(r"call (func_\d+) with x=(\d+)", user)
    return f"[{m.group(1)}(x={m.group(2)})]" if m else "no idea"


def answering_server() -> AbstractContextManager[FakeServer]:
    """A fake server in a thread, without faults, answering every numbered case right (use with ``with``)."""
    return FakeServer.thread(FakeScript(), answer_fn=answer_right)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def child_command(opts: dict[str, Any]) -> list[str]:
    """The command line of a ``support.runner_child`` run with these options (start it with ``child_env``)."""
    return [sys.executable, "-m", "support.runner_child", json.dumps(opts)]


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment plus ``extra``, with ``tests/`` on PYTHONPATH so the child finds ``support``."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **extra}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS_DIR), env.get("PYTHONPATH", "")) if p)
    return env


def batch_uploads(server: FakeServer) -> tuple[Counter[str], Counter[str]]:
    """From the fake server's batch log: how often each key was uploaded (files.create) and how often it was put
    in a batch that was created (batches.create, 200)."""
    uploaded: Counter[str] = Counter()
    batched: Counter[str] = Counter()
    for entry in server.batch_log():
        if entry["endpoint"] == "files.create":
            uploaded.update(entry.get("custom_ids") or ())
        elif entry["endpoint"] == "batches.create" and entry.get("status") == 200:
            batched.update(entry.get("custom_ids") or ())
    return uploaded, batched
